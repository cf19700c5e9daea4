// serve_client.mjs BASE_URL API_KEY ("none": the server has no key) - the official OpenAI client (the `openai` npm package,
// tests/node) against `cadenza serve`: plain and streamed completions and chat, usage in the
// stream, the client's typed errors for a refused request and a wrong key, and the model
// list. Prints one line per check and exits non-zero when any fails. tests/serve.sh runs
// it; without Node.js or the package it exits 77 (skipped).
let OpenAI;
try {
  ({ default: OpenAI } = await import(new URL('./node/node_modules/openai/index.mjs', import.meta.url)));
} catch (e) {
  console.log('SKIP: the openai package is not installed (npm ci --prefix tests/node)');
  process.exit(77);
}

const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 });
let failed = 0, passed = 0;

async function check(what, fn) {
  try {
    await fn();
    passed++;
    console.log('ok:', what);
  } catch (e) {
    failed++;
    console.log('FAIL:', what, '-', e && e.stack ? e.stack : e);
  }
}

function expect(cond, msg) {
  if (!cond) throw new Error(msg);
}

await check('models.list', async () => {
  const page = await client.models.list();
  expect(page.data.length === 1 && page.data[0].object === 'model', JSON.stringify(page.data));
});

const model = (await client.models.list()).data[0].id;

await check('completions.create', async () => {
  const r = await client.completions.create({ model, prompt: 'Say hi', max_tokens: 6 });
  expect(r.choices[0].finish_reason === 'length', JSON.stringify(r));
  expect(r.usage.completion_tokens === 6, JSON.stringify(r.usage));
});

await check('completions.create, streamed, with usage', async () => {
  const s = await client.completions.create({
    model, prompt: 'Count', max_tokens: 5, stream: true, stream_options: { include_usage: true },
  });
  let text = '', usage = null, finish = null, chunks = 0;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text;
      chunks++;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  expect(chunks === 5 && finish === 'length', `chunks ${chunks}, finish ${finish}`);
  expect(usage && usage.completion_tokens === 5 && usage.total_tokens === usage.prompt_tokens + 5,
    JSON.stringify(usage));
});

await check('chat.completions.create', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Hello' }], max_completion_tokens: 4,
  });
  expect(r.choices[0].message.role === 'assistant', JSON.stringify(r.choices[0]));
  expect(r.usage.completion_tokens === 4, JSON.stringify(r.usage));
});

await check('chat.completions.create, streamed', async () => {
  const s = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Short.' }, { role: 'user', content: 'Hi' }],
    max_tokens: 3, stream: true, stream_options: { include_usage: true },
  });
  let role = null, text = '', usage = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (ch.delta.role) role = ch.delta.role;
      text += ch.delta.content || '';
    }
  }
  expect(role === 'assistant' && usage && usage.completion_tokens === 3, `${role} ${JSON.stringify(usage)}`);
});

await check('a refused request is a BadRequestError naming the field', async () => {
  try {
    await client.completions.create({ model, prompt: 'x', n: 2 });
  } catch (e) {
    expect(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
    expect(e.status === 400 && /n/.test(e.message), e.message);
    return;
  }
  throw new Error('no error');
});

if (key !== 'none') await check('a wrong key is an AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: base, apiKey: 'wrong-key', maxRetries: 0 });
  try {
    await bad.completions.create({ model, prompt: 'x', max_tokens: 1 });
  } catch (e) {
    expect(e instanceof OpenAI.AuthenticationError && e.status === 401, `${e.constructor.name} ${e.status}`);
    return;
  }
  throw new Error('no error');
});

await check('an unknown model is a NotFoundError', async () => {
  try {
    await client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 });
  } catch (e) {
    expect(e instanceof OpenAI.NotFoundError && e.status === 404, `${e.constructor.name} ${e.status}`);
    return;
  }
  throw new Error('no error');
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
