// Reads one afloat route as a stream twice with the official `openai` package: by iterating
// the raw chunks, and through the SDK's ChatCompletionStream helper, which assembles the
// chunks into one completion and throws on a stream it cannot take for one. Prints one JSON
// object on stdout; exits 1 on any exception, with the error in that object.
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.AFLOAT_BASE_URL,
  apiKey: 'sdk-test-key',
  maxRetries: 0,
  timeout: 20000,
});
const params = {
  model: process.env.AFLOAT_MODEL,
  messages: [{ role: 'user', content: 'Tell me the story of the sixty tokens.' }],
};

const out = {};
try {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  let chunks = 0;
  const ids = new Set();
  for await (const chunk of stream) {
    chunks++;
    ids.add(chunk.id);
    const choice = chunk.choices[0];
    if (choice?.delta?.content) text += choice.delta.content;
    if (choice?.finish_reason) finish = choice.finish_reason;
  }
  out.iterated = { text, finish_reason: finish, chunks, ids: [...ids] };

  const helper = client.chat.completions.stream(params);
  const final = await helper.finalChatCompletion();
  out.helper = {
    text: final.choices[0]?.message?.content ?? null,
    finish_reason: final.choices[0]?.finish_reason ?? null,
    choices: final.choices.length,
  };
} catch (err) {
  out.error = `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}
console.log(JSON.stringify(out));
