// tokenizer_check.mjs - cadenza's tokenizer (models/cz_tokenizer.c, driven through
// tests/tok_tool) against independent implementations: @huggingface/tokenizers (a pure-JS
// port of Hugging Face `tokenizers`) encodes and decodes, @huggingface/jinja renders the
// models' own chat templates. Run by tests/tokenizer_check.sh (meson test
// tokenizer_check) with the packages of tests/node installed (`npm ci --prefix tests/node`).
//
// The tokenizer.json files are made here: a byte-level BPE vocabulary trained (most
// frequent pair first) on a text generated from a fixed seed, in the layouts Llama-3,
// Qwen2 and GPT-2 ship (Split regex + ByteLevel, merges as pairs or "a b" strings,
// ignore_merges, ByteLevel with GPT-2's regex, with and without the prefix space) and a
// literal Split stage, with special and plain added tokens. Each is asked to encode a list of hand-picked and
// generated strings; the ids must agree token for token, the decoded text (with and
// without special tokens) must agree, and decoding id by id must give the same text.
// The chat templates are the tokenizer_config.json "chat_template" strings of
// Meta-Llama-3-8B-Instruct, Llama-3.1-8B-Instruct, Qwen2-7B-Instruct, Qwen2.5-7B-Instruct
// and Qwen3-8B; cadenza must pick the right built-in renderer for each and render each
// conversation to the same text.
//
// usage: node tests/tokenizer_check.mjs TOK_TOOL      (exits 1 when any comparison fails)
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "node", "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");
const { Template } = require("@huggingface/jinja");

const tool = process.argv[2];
if (!tool) {
  console.error("usage: node tokenizer_check.mjs TOK_TOOL");
  process.exit(2);
}

let passed = 0;
let failed = 0;
function check(ok, what, detail) {
  if (ok) {
    passed++;
    return;
  }
  failed++;
  if (failed <= 25) console.log(`FAIL: ${what}\n${detail}`);
}

// ---- a deterministic text to train on ----

function rng(seed) {
  // mulberry32
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(20240611);
const pick = (a) => a[Math.floor(rand() * a.length)];

const english = (
  "the of and to in is you that it he was for on are as with his they at be this have from " +
  "or one had by word but not what all were we when your can said there use an each which she " +
  "do how their if will up other about out many then them these so some her would make like him " +
  "into time has look two more write go see number no way could people my than first water been " +
  "call who oil its now find long down day did get come made may part hello world server token " +
  "model request latency throughput scheduler prefill decode batch cache memory stream engine"
).split(" ");
const contractions = ["it's", "don't", "I'm", "you're", "we've", "they'll", "she'd", "IT'S",
  "Don'T", "WE'LL", "o'clock", "rock'n'roll"];
const accented = ("héllo café naïve façade über straße déjà vu piñata coöperate résumé " +
  "Ελληνικά русский язык ąčęėįšųūž").split(" ");
const cjk = "世界你好中文的是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从".split("");
const emoji = Array.from("🎵👍🏽😀🚀🔥✨🧪🌍🎉💡🤖🍕⚡❤️🙂");
const punct = [".", ",", "!", "?", ";", ":", "...", "--", "(", ")", "\"", "'", "[", "]", "{",
  "}", "<", ">", "/", "\\", "#", "@", "$", "%", "&", "*", "+", "=", "_", "|", "~", "^", "`"];
const code = ["x += 1;", "for (int i = 0; i < n; i++)", "return ok;", "def f(x):",
  "    pass", "if err != nil {", "}", "<div class=\"a\">", "0x7fff", "a->b", "::", "=>"];

function sentence() {
  const parts = [];
  const n = 3 + Math.floor(rand() * 12);
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.55) parts.push(pick(english));
    else if (r < 0.62) parts.push(pick(contractions));
    else if (r < 0.7) parts.push(pick(accented));
    else if (r < 0.77) parts.push(Array.from({ length: 1 + Math.floor(rand() * 4) }, () => pick(cjk)).join(""));
    else if (r < 0.8) parts.push(pick(emoji));
    else if (r < 0.88) parts.push(String(Math.floor(rand() * 10 ** (1 + Math.floor(rand() * 7)))));
    else if (r < 0.95) parts.push(pick(punct));
    else parts.push(pick(code));
  }
  let s = parts.join(rand() < 0.9 ? " " : "  ");
  if (rand() < 0.3) s = s[0].toUpperCase() + s.slice(1);
  return s + pick([".", "!", "?", "\n", "\n\n", " ", ""]);
}
let corpus = "";
while (corpus.length < 40000) corpus += sentence();

// ---- byte-level BPE training ----

function bytesToUnicode() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const map = new Array(256);
  bs.forEach((b, i) => (map[b] = String.fromCodePoint(cs[i])));
  return map;
}
const B2U = bytesToUnicode();
const byteLevel = (s) => Array.from(Buffer.from(s, "utf8"), (b) => B2U[b]).join("");

// Llama-3's split regex for training (JavaScript has no inline (?i:...) before ES2025)
const trainSplit =
  /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

function train(text, nMerges) {
  const counts = new Map();
  for (const m of text.matchAll(trainSplit)) {
    const w = byteLevel(m[0]);
    counts.set(w, (counts.get(w) ?? 0) + 1);
  }
  const words = [...counts].map(([w, c]) => ({ s: Array.from(w), c }));
  const merges = [];
  for (let it = 0; it < nMerges; it++) {
    const pairs = new Map();
    for (const w of words) {
      for (let i = 0; i + 1 < w.s.length; i++) {
        const k = w.s[i] + "\u0000" + w.s[i + 1];
        pairs.set(k, (pairs.get(k) ?? 0) + w.c);
      }
    }
    let best = null;
    let bestN = 0;
    for (const [k, n] of pairs) {
      if (n > bestN || (n === bestN && k < best)) {
        best = k;
        bestN = n;
      }
    }
    if (!best) break;
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    for (const w of words) {
      const out = [];
      for (let i = 0; i < w.s.length; i++) {
        if (i + 1 < w.s.length && w.s[i] === a && w.s[i + 1] === b) {
          out.push(a + b);
          i++;
        } else {
          out.push(w.s[i]);
        }
      }
      w.s = out;
    }
  }
  return merges;
}

const merges = train(corpus, 2500);
const vocab = {};
for (let b = 0; b < 256; b++) vocab[B2U[b]] = b;
for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
// whole words no merge sequence may reach: ignore_merges makes them one token
// (and pre-tokens that only come out whole when the regex reads \s as Oniguruma does)
for (const w of [" tokenizer", "hello", " world!", "12345", " 世界", "'S", "\n\n\n", "...",
  "!\u180e!", " \u00a0\u00a0"]) {
  const s = byteLevel(w);
  if (!(s in vocab)) vocab[s] = Object.keys(vocab).length;
}
const nVocab = Object.keys(vocab).length;
const added = [
  ["<|begin_of_text|>", true], ["<|end_of_text|>", true], ["<|start_header_id|>", true],
  ["<|end_header_id|>", true], ["<|eot_id|>", true], ["<|im_start|>", true],
  ["<|im_end|>", true], ["<|endoftext|>", true], ["<think>", false], ["</think>", false],
  ["cadenza", false], ["<|reserved_special_token_0|>", true], ["<|reserved_special_token_01|>", true],
].map(([content, special], i) => ({
  id: nVocab + i, content, single_word: false, lstrip: false, rstrip: false,
  normalized: false, special,
}));

const llama3Regex =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const qwen2Regex =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const split = (regex) => ({
  type: "Sequence",
  pretokenizers: [
    { type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
  ],
});
const byteLevelPre = (prefix) => ({
  type: "ByteLevel", add_prefix_space: prefix, trim_offsets: true, use_regex: true,
});

function tokenizerJson(pre, pairs, ignoreMerges) {
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: pre,
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
      ignore_merges: ignoreMerges, vocab,
      merges: pairs ? merges : merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}
const variants = {
  llama3: tokenizerJson(split(llama3Regex), true, true),
  qwen2: tokenizerJson(split(qwen2Regex), false, false),
  gpt2: tokenizerJson(byteLevelPre(false), false, false),
  gpt2_prefix: tokenizerJson(byteLevelPre(true), true, false),
  // a literal Split stage, then ByteLevel with its own regex and prefix space per piece
  literal: tokenizerJson({
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { String: ", " }, behavior: "Isolated", invert: false },
      byteLevelPre(true),
    ],
  }, true, true),
};

// ---- the strings ----

const fixed = [
  "", " ", "  ", "\n", "\r\n", "\t", "hello world", "Hello World!", "héllo 世界 🎵",
  "1234567 89 0 3.14159 1,000,000", "it's don't I'm you're we've they'll she'd",
  "IT'S DON'T I'M YOU'RE WE'VE THEY'LL SHE'D It'S", "'s 's' ''s", "a   b    c\t\td",
  "line1\nline2\n\nline3\r\n\r\nline4   \n  \n", "   leading and trailing   ",
  "<|begin_of_text|>hello<|eot_id|>", "x<|eot_id|><|eot_id|>y", "<|eot_id", "<|eot_id|",
  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<think>\nhmm\n</think>\n\nok",
  "cadenzacadenza cadenza!", "<|reserved_special_token_01|><|reserved_special_token_0|>",
  "naïve façade über straße", "Ελληνικά русский язык", "مرحبا بالعالم", "नमस्ते दुनिया",
  "日本語のテキストです。", "한국어 텍스트", "e\u0301 n\u0303 combining", "👍🏽👨‍👩‍👧 family",
  "nbsp\u00a0here ideographic\u3000space", "nel\u0085line mvs\u180esep bom\ufeffmark",
  "ls\u2028ps\u2029", "tabs\t\t\tand  spaces", "x += 1; // comment", "def f(x):\n    return x * 2\n",
  "{\"json\": [1, 2, 3], \"k\": null}", "https://example.com/a?b=c&d=e#f", "...!!!???",
  "emoji🚀rocket", "12345", " tokenizer hello world!", "\n\n\n", " 世界", "'S",
  "ÀÁÂÃÄÅ àáâãäå", "end", "a".repeat(300), "ab ".repeat(100),
  "🎵".repeat(20), "9".repeat(40), "!\u180e!", "x !\u180e! y", "a \u00a0\u00a0b",
];
const pieces = [
  ...english, ...contractions, ...accented, ...cjk, ...emoji, ...punct, ...code,
  " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", "\u00a0", "\u3000", "\u0085", "\u2028",
  "<|eot_id|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "cadenza", "<|eot",
  "|>", "<|", "'s", "'LL", "'", "123", "4567", "0", "3.5", "e\u0301",
];
const generated = [];
for (let i = 0; i < 600; i++) {
  const n = 1 + Math.floor(rand() * 14);
  let s = "";
  for (let k = 0; k < n; k++) s += pick(pieces);
  generated.push(s);
}
const strings = [...fixed, ...generated];

// ---- run ----

const tmp = mkdtempSync(join(tmpdir(), "cz-tokcheck-"));
try {
  const stringsFile = join(tmp, "strings.jsonl");
  writeFileSync(stringsFile, strings.map((s) => JSON.stringify(s)).join("\n") + "\n");
  for (const [name, tj] of Object.entries(variants)) {
    const dir = join(tmp, name);
    mkdirSync(dir);
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
    const config = { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>", clean_up_tokenization_spaces: false };
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
    const ref = new Tokenizer(tj, config);
    const out = execFileSync(tool, ["encode", dir, stringsFile], { maxBuffer: 1 << 28 })
      .toString().split("\n").filter((l) => l.length).map((l) => JSON.parse(l));
    check(out.length === strings.length, `${name}: one line per string`,
      `  ${out.length} lines for ${strings.length} strings`);
    strings.forEach((s, i) => {
      const got = out[i] ?? { error: "no output" };
      const want = ref.encode(s, { add_special_tokens: false }).ids;
      const what = `${name}: ${JSON.stringify(s).slice(0, 120)}`;
      if (got.error) {
        check(false, what, `  cadenza failed: ${got.error}`);
        return;
      }
      const same = got.ids.length === want.length && got.ids.every((v, k) => v === want[k]);
      check(same, `${what}: ids`, `  cadenza   ${JSON.stringify(got.ids)}\n  reference ${JSON.stringify(want)}`);
      if (want.length) {
        const text = ref.decode(want, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
        const textSkip = ref.decode(want, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
        check(got.text === text, `${what}: decoded`, `  cadenza   ${JSON.stringify(got.text)}\n  reference ${JSON.stringify(text)}`);
        check(got.text_skip === textSkip, `${what}: decoded without special tokens`,
          `  cadenza   ${JSON.stringify(got.text_skip)}\n  reference ${JSON.stringify(textSkip)}`);
      }
      check(got.stream_ok === true, `${what}: decoding id by id`, "  differs from decoding all at once");
    });
  }

  // ---- chat templates ----
  const templates = {
    llama3: String.raw`{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}`,
    llama31: String.raw`{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`,
    qwen2: String.raw`{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`,
    chatml: String.raw`{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`,
    qwen3: String.raw`{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}`,
  };

  const conversations = [
    [{ role: "user", content: "Hello!" }],
    [{ role: "system", content: "You are terse." }, { role: "user", content: "What is 2+2?" }],
    [{ role: "system", content: "  padded system \n" }, { role: "user", content: "\n hi \t" },
      { role: "assistant", content: " Hello there. " }, { role: "user", content: "more\n\n" }],
    [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" },
      { role: "assistant", content: "d" }],
    [{ role: "user", content: "q" }, { role: "assistant", content: "<think>\nstep 1\nstep 2\n</think>\n\nanswer" },
      { role: "user", content: "again" }],
    [{ role: "user", content: "q" }, { role: "assistant", content: "<think>\nreasoning\n</think>\n\nfinal" }],
    [{ role: "user", content: "q" }, { role: "assistant", content: "\n\nno think block" }],
    [{ role: "user", content: "q" }, { role: "assistant", content: "x</think>y</think>\nz" }],
    [{ role: "user", content: "<tool_response>r</tool_response>" }, { role: "assistant", content: "<think>a</think>b" },
      { role: "user", content: "real" }, { role: "assistant", content: "partial" }],
    [{ role: "user", content: "first" }, { role: "system", content: "late system" }, { role: "user", content: "second" }],
    [{ role: "user", content: "héllo 世界 🎵 <|eot_id|> literal" }],
    [{ role: "user", content: "" }, { role: "assistant", content: "" }],
  ];
  const convsFile = join(tmp, "convs.json");
  const cases = [];
  for (const messages of conversations)
    for (const add_generation_prompt of [true, false]) cases.push({ messages, add_generation_prompt });
  writeFileSync(convsFile, JSON.stringify(cases));
  for (const [name, tpl] of Object.entries(templates)) {
    // cadenza picks the renderer from the template text in tokenizer_config.json
    const dir = join(tmp, `chat-${name}`);
    mkdirSync(dir);
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(variants.llama3));
    writeFileSync(join(dir, "tokenizer_config.json"),
      JSON.stringify({ bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>", chat_template: tpl }));
    const info = JSON.parse(execFileSync(tool, ["info", dir]).toString());
    check(info.chat === name, `chat template ${name}: picked from tokenizer_config.json`,
      `  cadenza picked ${info.chat}`);
    const out = execFileSync(tool, ["chat", `auto:${dir}`, convsFile]).toString()
      .split("\n").filter((l) => l.length).map((l) => JSON.parse(l));
    const template = new Template(tpl);
    cases.forEach((c, i) => {
      const want = template.render({
        messages: c.messages, add_generation_prompt: c.add_generation_prompt,
        bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>",
      });
      const got = out[i] ?? { error: "no output" };
      check(got.text === want, `chat ${name}: ${JSON.stringify(c).slice(0, 160)}`,
        `  cadenza   ${JSON.stringify(got.text ?? got.error)}\n  reference ${JSON.stringify(want)}`);
    });
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
// one summary line, not the bare "N passed, N failed" that tests/run.sh adds to its totals:
// this is one meson test, however many comparisons it makes
console.log(`tokenizer_check: ${Object.keys(variants).length} layouts x ${strings.length} ` +
  `strings and 5 chat templates: ${passed} comparisons passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
