/** The figures shown under each answer: time to first token and tokens per second. */

export interface AnswerTiming {
  /** Milliseconds on one clock (performance.now()): when the request left, the first text came, the answer ended. */
  sentAt: number;
  firstTextAt?: number;
  endedAt?: number;
  /** Text pieces received: the count of tokens when the gateway sends no usage. */
  pieces: number;
  /** completion_tokens of the stream's usage chunk, when it came. */
  completionTokens?: number;
}

export interface AnswerFigures {
  ttftMs?: number;
  tokens: number;
  /** Whether `tokens` is the engine's count (usage) or the pieces counted here. */
  counted: 'usage' | 'pieces';
  tokensPerS?: number;
}

/**
 * Tokens per second is the decoding rate after the first token: the first one's wait is the
 * time to first token, so it counts in neither the tokens nor the time.
 */
export function answerFigures(t: AnswerTiming): AnswerFigures {
  const tokens = t.completionTokens ?? t.pieces;
  const counted = t.completionTokens === undefined ? 'pieces' : 'usage';
  const out: AnswerFigures = { tokens, counted };
  if (t.firstTextAt === undefined) return out;
  out.ttftMs = Math.max(0, t.firstTextAt - t.sentAt);
  if (t.endedAt !== undefined && tokens > 1 && t.endedAt > t.firstTextAt) {
    out.tokensPerS = ((tokens - 1) * 1000) / (t.endedAt - t.firstTextAt);
  }
  return out;
}

/** 840 ms, 1.25 s. */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** 12.3 tokens/s; 3 significant figures below 100. */
export function formatRate(perS: number): string {
  return `${perS >= 100 ? Math.round(perS) : perS.toPrecision(3)} tokens/s`;
}

/** The line under an answer: "TTFT 120 ms · 42.0 tokens/s · 64 tokens". */
export function figuresLine(f: AnswerFigures): string {
  const parts: string[] = [];
  if (f.ttftMs !== undefined) parts.push(`time to first token ${formatMs(f.ttftMs)}`);
  if (f.tokensPerS !== undefined) parts.push(formatRate(f.tokensPerS));
  parts.push(
    `${f.tokens} ${f.tokens === 1 ? 'token' : 'tokens'}${f.counted === 'pieces' ? ' (counted)' : ''}`,
  );
  return parts.join(' · ');
}
