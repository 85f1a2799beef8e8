// Calls afloat with the official `openai` package exactly as an app written for OpenAI does,
// with the gateway's base URL and an OpenAI model name that afloat knows as an alias of a
// route: a chat completion, streamed and not, and the models list. Prints one JSON object on
// stdout; exits 1 on any exception, with the error in that object.
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.AFLOAT_BASE_URL, apiKey: process.env.AFLOAT_KEY, timeout: 20000 });
const params = { model: process.env.AFLOAT_MODEL, messages: [{ role: 'user', content: 'Where is my order?' }] };

const out = {};
try {
  const { data: completion, response } = await client.chat.completions.create(params).withResponse();
  out.completion = {
    model: completion.model, text: completion.choices[0]?.message?.content ?? null,
    finish_reason: completion.choices[0]?.finish_reason ?? null, route: response.headers.get('x-afloat-route'),
  };
  const final = await client.chat.completions.stream(params).finalChatCompletion();
  out.stream = { model: final.model, text: final.choices[0]?.message?.content ?? null, finish_reason: final.choices[0]?.finish_reason ?? null };
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  out.models = models;
  out.retrieved = (await client.models.retrieve(process.env.AFLOAT_MODEL)).id;
} catch (err) {
  out.error = `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}
console.log(JSON.stringify(out));
