import { useQuery } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState, type KeyboardEvent, type SyntheticEvent } from 'react';

import { queryKeys, type GatewayModel } from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import { answerFigures, figuresLine, type AnswerTiming } from './playground-figures.js';
import {
  chatRequest,
  curlCommand,
  numberField,
  pythonCode,
  type ChatMessage,
  type ChatRequest,
  type ChatSettings,
} from './playground-request.js';
import { readChatStream } from './playground-stream.js';

type Turn =
  | { id: number; role: 'user'; content: string }
  | {
      id: number;
      role: 'assistant';
      content: string;
      model: string;
      state: 'streaming' | 'done' | 'stopped' | 'failed';
      timing: AnswerTiming;
      finish?: string;
      error?: string;
    };

/** The model offered first: one with a ready replica, else the first listed. */
export function defaultModel(models: readonly GatewayModel[]): string {
  return (models.find((m) => m.ready_replicas > 0) ?? models[0])?.id ?? '';
}

/** What the next request carries of the conversation: questions and answers that came, not failures. */
function history(turns: readonly Turn[]): ChatMessage[] {
  return turns
    .filter((t) => t.role === 'user' || (t.state !== 'failed' && t.content !== ''))
    .map((t) => ({ role: t.role, content: t.content }));
}

const now = () => performance.now();

/** Chat with a served model through the gateway, streamed, with each answer's figures and the request to copy. */
export function Playground() {
  const { api } = useSession();
  const models = useQuery({ queryKey: queryKeys.gatewayModels, queryFn: () => api.gatewayModels() });
  const ids = useId();
  const [picked, setPicked] = useState('');
  const [system, setSystem] = useState('');
  const [temperature, setTemperature] = useState('');
  const [maxTokens, setMaxTokens] = useState('');
  const [draft, setDraft] = useState('');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [running, setRunning] = useState<AbortController | undefined>();
  const [lastSent, setLastSent] = useState<ChatRequest | undefined>();
  const nextId = useRef(0);
  const log = useRef<HTMLOListElement>(null);

  const list = models.data ?? [];
  const model = list.some((m) => m.id === picked) ? picked : defaultModel(list);
  const temp = numberField(temperature, { name: 'Temperature', min: 0, max: 2 });
  const max = numberField(maxTokens, { name: 'Max tokens', min: 1, max: 1_000_000, integer: true });
  const settings: ChatSettings = {
    model,
    system,
    ...(temp.value === undefined ? {} : { temperature: temp.value }),
    ...(max.value === undefined ? {} : { maxTokens: max.value }),
  };
  // The code shows what Send would send; with nothing typed, the request of the last answer.
  const shown =
    draft.trim() === '' && lastSent !== undefined
      ? lastSent
      : chatRequest(settings, [...history(turns), { role: 'user', content: draft }]);

  useEffect(() => {
    const el = log.current;
    if (el !== null) el.scrollTop = el.scrollHeight;
  }, [turns]);
  // Leaving the view stops an answer in flight.
  useEffect(() => () => running?.abort(), [running]);

  const update = (id: number, change: (t: Extract<Turn, { role: 'assistant' }>) => Partial<Turn>) => {
    setTurns((all) => all.map((t) => (t.id === id && t.role === 'assistant' ? { ...t, ...change(t) } : t)));
  };

  async function send(e?: SyntheticEvent) {
    e?.preventDefault();
    if (running !== undefined || draft.trim() === '' || model === '') return;
    if (temp.error !== undefined || max.error !== undefined) return;
    const body = chatRequest(settings, [...history(turns), { role: 'user', content: draft }]);
    const ac = new AbortController();
    const question = nextId.current++;
    const id = nextId.current++;
    setTurns((all) => [
      ...all,
      { id: question, role: 'user', content: draft },
      { id, role: 'assistant', content: '', model, state: 'streaming', timing: { sentAt: now(), pieces: 0 } },
    ]);
    setDraft('');
    setLastSent(body);
    setRunning(ac);
    try {
      const res = await api.chat(body, ac.signal);
      if (res.body === null) throw new Error('the gateway answered without a body');
      await readChatStream(
        res.body,
        (item) => {
          switch (item.kind) {
            case 'text':
              update(id, (t) => ({
                content: t.content + item.text,
                timing: {
                  ...t.timing,
                  firstTextAt: t.timing.firstTextAt ?? now(),
                  pieces: t.timing.pieces + 1,
                },
              }));
              break;
            case 'usage':
              update(id, (t) => ({ timing: { ...t.timing, completionTokens: item.completionTokens } }));
              break;
            case 'finish':
              update(id, () => ({ finish: item.reason }));
              break;
            case 'error':
              update(id, () => ({ state: 'failed', error: item.message }));
              break;
            case 'done':
              break;
          }
        },
        ac.signal,
      );
      const ended = now();
      update(id, (t) => ({
        state: t.state === 'failed' ? 'failed' : 'done',
        timing: { ...t.timing, endedAt: ended },
      }));
    } catch (err) {
      const ended = now();
      if (ac.signal.aborted)
        update(id, (t) => ({ state: 'stopped', timing: { ...t.timing, endedAt: ended } }));
      else
        update(id, (t) => ({
          state: 'failed',
          error: err instanceof Error ? err.message : String(err),
          timing: { ...t.timing, endedAt: ended },
        }));
    } finally {
      setRunning(undefined);
    }
  }

  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    // Enter sends, Shift+Enter is a new line: as in other chats.
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) void send(e);
  };

  return (
    <section aria-labelledby="view-title" className="playground">
      <h1 id="view-title">Playground</h1>
      <div className="playground-grid">
        <form className="card playground-settings" aria-label="Settings" onSubmit={(e) => e.preventDefault()}>
          <label htmlFor={`${ids}-model`}>Model</label>
          <QueryError query={models} what="the gateway's models" />
          {models.data !== undefined && list.length === 0 && (
            <p className="hint">No model this key may use is served: add one in Models.</p>
          )}
          <select
            id={`${ids}-model`}
            value={model}
            disabled={list.length === 0}
            onChange={(e) => {
              setPicked(e.target.value);
            }}
          >
            {list.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
                {m.ready_replicas === 0 ? ' (no ready replica)' : ''}
              </option>
            ))}
          </select>
          <label htmlFor={`${ids}-system`}>System prompt</label>
          <textarea
            id={`${ids}-system`}
            rows={4}
            value={system}
            placeholder="You are a helpful assistant."
            onChange={(e) => {
              setSystem(e.target.value);
            }}
          />
          <label htmlFor={`${ids}-temp`}>Temperature</label>
          <input
            id={`${ids}-temp`}
            inputMode="decimal"
            placeholder="engine default"
            value={temperature}
            aria-invalid={temp.error !== undefined}
            aria-describedby={temp.error === undefined ? undefined : `${ids}-temp-error`}
            onChange={(e) => {
              setTemperature(e.target.value);
            }}
          />
          {temp.error !== undefined && (
            <p id={`${ids}-temp-error`} role="alert" className="error">
              {temp.error}
            </p>
          )}
          <label htmlFor={`${ids}-max`}>Max tokens</label>
          <input
            id={`${ids}-max`}
            inputMode="numeric"
            placeholder="engine default"
            value={maxTokens}
            aria-invalid={max.error !== undefined}
            aria-describedby={max.error === undefined ? undefined : `${ids}-max-error`}
            onChange={(e) => {
              setMaxTokens(e.target.value);
            }}
          />
          {max.error !== undefined && (
            <p id={`${ids}-max-error`} role="alert" className="error">
              {max.error}
            </p>
          )}
        </form>

        <div className="card playground-chat">
          <ol
            className="chat-log"
            ref={log}
            aria-label="Conversation"
            aria-live="polite"
            // Read out once an answer is whole, not at each piece.
            aria-busy={running !== undefined}
          >
            {turns.length === 0 && <li className="hint">Ask something to start.</li>}
            {turns.map((t) => (
              <li key={t.id} className={`turn turn-${t.role}`}>
                <span className="turn-who">{t.role === 'user' ? 'You' : t.model}</span>
                <div className="turn-text">{t.content}</div>
                {t.role === 'assistant' && <AnswerStatus turn={t} />}
              </li>
            ))}
          </ol>
          <form className="chat-input" onSubmit={(e) => void send(e)}>
            <label htmlFor={`${ids}-draft`} className="visually-hidden">
              Message
            </label>
            <textarea
              id={`${ids}-draft`}
              rows={2}
              value={draft}
              placeholder="Message (Enter sends, Shift+Enter for a new line)"
              onChange={(e) => {
                setDraft(e.target.value);
              }}
              onKeyDown={onKey}
            />
            <div className="chat-buttons">
              {running === undefined ? (
                <button
                  type="submit"
                  disabled={
                    draft.trim() === '' || model === '' || temp.error !== undefined || max.error !== undefined
                  }
                >
                  Send
                </button>
              ) : (
                <button
                  type="button"
                  onClick={() => {
                    running.abort();
                  }}
                >
                  Stop
                </button>
              )}
              <button
                type="button"
                disabled={running !== undefined || turns.length === 0}
                onClick={() => {
                  setTurns([]);
                  setLastSent(undefined);
                }}
              >
                Clear
              </button>
            </div>
          </form>
        </div>
      </div>

      <article className="card" aria-labelledby={`${ids}-code`}>
        <h2 id={`${ids}-code`}>The request as code</h2>
        <p className="hint">
          The key is read from <code>$LLMGW_KEY</code>: <code>export LLMGW_KEY=…</code> first.
        </p>
        <Snippet title="curl" text={curlCommand(window.location.origin, shown)} />
        <Snippet title="Python (openai)" text={pythonCode(window.location.origin, shown)} />
      </article>
    </section>
  );
}

function AnswerStatus({ turn }: { turn: Extract<Turn, { role: 'assistant' }> }) {
  if (turn.state === 'failed') {
    return (
      <p role="alert" className="error">
        {turn.error}
      </p>
    );
  }
  const figures = figuresLine(answerFigures(turn.timing));
  const note =
    turn.state === 'streaming'
      ? 'answering…'
      : turn.state === 'stopped'
        ? 'stopped'
        : turn.finish === 'length'
          ? 'cut at max tokens'
          : undefined;
  return (
    <p className="turn-figures hint">
      {note === undefined ? '' : `${note} · `}
      {figures}
    </p>
  );
}

function Snippet({ title, text }: { title: string; text: string }) {
  const [copied, setCopied] = useState<string | undefined>();
  const id = useId();
  return (
    <div className="snippet">
      <div className="snippet-head">
        <h3 id={id}>{title}</h3>
        <button
          type="button"
          aria-label={`Copy the ${title} code`}
          onClick={() => {
            navigator.clipboard.writeText(text).then(
              () => {
                setCopied('Copied');
              },
              (e: unknown) => {
                setCopied(
                  `Could not copy (${e instanceof Error ? e.message : String(e)}): select the text and copy it`,
                );
              },
            );
          }}
        >
          Copy
        </button>
        <span role="status" className="hint">
          {copied}
        </span>
      </div>
      <pre aria-labelledby={id} tabIndex={0}>
        <code>{text}</code>
      </pre>
    </div>
  );
}
