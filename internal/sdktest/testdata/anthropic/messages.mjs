// Calls afloat's /v1/messages with the official `@anthropic-ai/sdk` package, pointed at the
// gateway by its base URL alone: a plain message, a stream read through the SDK's
// MessageStream helper and one read as raw events, a tool round trip, and a route whose every
// tier is down, with the SDK's default retries. Prints one JSON object on stdout; exits 1 on
// an unexpected exception, with the error in that object.
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({ baseURL: process.env.AFLOAT_BASE_URL, apiKey: process.env.AFLOAT_KEY, timeout: 20000 });
const model = process.env.AFLOAT_MODEL;
const question = [{ role: 'user', content: 'Where is my order?' }];
const tools = [{
  name: 'get_weather',
  description: 'Weather by city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

const out = {};
try {
  const { data: plain, response } = await client.messages
    .create({ model, max_tokens: 256, system: 'Be brief.', messages: question })
    .withResponse();
  out.plain = {
    id: plain.id, type: plain.type, role: plain.role, model: plain.model, content: plain.content,
    stop_reason: plain.stop_reason, usage: plain.usage, request_id: plain._request_id ?? null,
    route: response.headers.get('x-afloat-route'),
  };

  const helper = client.messages.stream({ model, max_tokens: 256, messages: question });
  let streamed = '';
  helper.on('text', (delta) => { streamed += delta; });
  const final = await helper.finalMessage();
  out.helper = { streamed, text: final.content[0]?.text ?? null, blocks: final.content.length,
    stop_reason: final.stop_reason, model: final.model, usage: final.usage };

  const raw = await client.messages.create({ model, max_tokens: 256, messages: question, stream: true });
  const types = [];
  let text = '';
  for await (const ev of raw) {
    if (types.at(-1) !== ev.type) types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  out.raw = { types, text };

  const ask = [{ role: 'user', content: 'Weather in Moscow?' }];
  const call = await client.messages.create({ model, max_tokens: 256, tools, tool_choice: { type: 'any' }, messages: ask });
  const use = call.content.find((b) => b.type === 'tool_use');
  const answer = await client.messages.create({
    model, max_tokens: 256, tools,
    messages: [...ask, { role: 'assistant', content: call.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '8°C' }] }],
  });
  out.tools = { stop_reason: call.stop_reason, use, answer: answer.content[0]?.text ?? null, answer_stop: answer.stop_reason };

  try {
    await client.messages.create({ model: process.env.AFLOAT_DOWN_MODEL, max_tokens: 64, messages: question });
    out.exhausted = { error: 'the call succeeded; want an APIError' };
  } catch (err) {
    if (!(err instanceof Anthropic.APIError)) throw err;
    out.exhausted = {
      class: err.constructor.name, status: err.status, type: err.type, message: err.apiMessage,
      overloaded: err instanceof Anthropic.OverloadedError, request_id: err.requestID ?? null,
      retry_after: err.headers?.get('retry-after') ?? null,
    };
  }
} catch (err) {
  out.error = `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}
console.log(JSON.stringify(out));
