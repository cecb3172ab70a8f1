// A key's client for test/chaos/noisy-key.test.ts, in a process of its own as a user's curl
// is, so that neither client's work delays the other's, or the gateway's:
//   {run: {url, key, loops, pauseMs}}  sends, in `loops` loops, requests an engine refuses
//     (llama-server answers 500 to each: an image for a text model, `"tools": 5` or `[{}]`, a
//     lone surrogate, a number past a double, bytes that are not UTF-8), each `pauseMs` after
//     the last answer; {stop: true} finishes those in flight and answers
//     {done: {sent: {kind: n}, notRefused: [...]}}.
//   {chats: {url, key, count, from}}  sends `count` small chats one after another and answers
//     {timed: {ms: [...], failures: [...]}}.
const text = (s) => new TextEncoder().encode(s);
const hi = { role: 'user', content: 'hi' };
const image = {
  role: 'user',
  content: [
    { type: 'text', text: 'what is this?' },
    { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
  ],
};
const refused = [
  ['image', text(JSON.stringify({ model: 'tiny', max_tokens: 2, messages: [image] }))],
  ['tools', text(JSON.stringify({ model: 'tiny', messages: [hi], tools: 5 }))],
  ['empty tool', text(JSON.stringify({ model: 'tiny', messages: [hi], tools: [{}] }))],
  ['surrogate', text('{"model":"tiny","messages":[{"role":"user","content":"\\ud800"}]}')],
  ['overflow', text('{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":1e309}')],
  [
    'utf-8',
    new Uint8Array([
      ...text('{"model":"tiny","messages":[{"role":"user","content":"'),
      0xc3,
      0x28,
      ...text('"}]}'),
    ]),
  ],
];

let running;

async function loop(o, offset, state) {
  for (let i = offset; !state.stop; i++) {
    const [kind, body] = refused[i % refused.length];
    const res = await fetch(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
      body,
    });
    const answer = await res.text();
    state.sent[kind] = (state.sent[kind] ?? 0) + 1;
    // The caller's error, in OpenAI's shape: never a 5xx, never anything but 400.
    if (res.status !== 400 || !answer.includes('"invalid_request_error"'))
      state.notRefused.push(`${kind}: ${res.status} ${answer.slice(0, 200)}`);
    await new Promise((resolve) => setTimeout(resolve, o.pauseMs));
  }
}

async function chats(o) {
  const ms = [];
  const failures = [];
  for (let i = 0; i < o.count; i++) {
    const started = performance.now();
    const res = await fetch(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tiny',
        messages: [{ role: 'user', content: `hi ${o.from + i}` }],
        max_tokens: 2,
      }),
    });
    const answer = await res.text();
    ms.push(performance.now() - started);
    if (res.status !== 200) failures.push(`${res.status} ${answer.slice(0, 200)}`);
  }
  return { ms, failures };
}

process.on('message', (m) => {
  if (m.chats !== undefined) {
    void chats(m.chats).then(
      (timed) => process.send({ timed }),
      (e) => process.send({ timed: { ms: [], failures: [String(e)] } }),
    );
  } else if (m.run !== undefined) {
    const state = { stop: false, sent: {}, notRefused: [] };
    running = {
      state,
      loops: Promise.all(Array.from({ length: m.run.loops }, (_, k) => loop(m.run, k, state))),
    };
  } else if (m.stop === true && running !== undefined) {
    const { state, loops } = running;
    running = undefined;
    state.stop = true;
    void loops.then(
      () => process.send({ done: { sent: state.sent, notRefused: state.notRefused } }),
      (e) => process.send({ done: { sent: state.sent, notRefused: [...state.notRefused, String(e)] } }),
    );
  }
});
process.on('disconnect', () => process.exit(0));
