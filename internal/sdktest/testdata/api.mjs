// Lists afloat's routes with the official `openai` package and reads its errors: a wrong
// key on chat, an unknown route, and a wrong key on the list. Prints one JSON object on
// stdout; exits 1 on an unexpected exception, with the error in that object.
import OpenAI from 'openai';

const opts = { baseURL: process.env.AFLOAT_BASE_URL, maxRetries: 0, timeout: 20000 };
const client = new OpenAI({ ...opts, apiKey: process.env.AFLOAT_KEY });
const wrong = new OpenAI({ ...opts, apiKey: 'sdk-wrong-key' });
const chat = (c, model) => c.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });

// caught runs call, which must throw an APIError, and returns what the SDK read of it.
async function caught(call) {
  try {
    await call();
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return { class: err.constructor.name, status: err.status, type: err.type, code: err.code, param: err.param };
  }
  throw new Error('the call succeeded; want an APIError');
}

const out = {};
try {
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  out.models = models;
  out.errors = [
    await caught(() => chat(wrong, process.env.AFLOAT_MODEL)),
    await caught(() => chat(client, 'gpt-9')),
    await caught(() => wrong.models.list()),
  ];
} catch (err) {
  out.error = `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}
console.log(JSON.stringify(out));
