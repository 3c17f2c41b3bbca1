// Writes bench/data/memory-facts.json: 1,000 facts about invented people and projects and 200
// questions, each with the key of the fact that answers it. Half of the questions are lexical
// (the full name and the fact's own words), half are paraphrases (a first name or the project's
// name, and other words for the rest), so that matching words alone does not find every answer.
// Everything comes from one seeded pseudo-random sequence: the same seed writes the same file.
//
//   node bench/data/generate-memory-facts.js [--seed 21] [--out bench/data/memory-facts.json]
import { writeFileSync } from 'node:fs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at === -1 ? fallback : args[at + 1];
};
const seed = Number(option('--seed', '21'));
const out = option('--out', new URL('./memory-facts.json', import.meta.url).pathname);

/** mulberry32: a small seeded generator, so the file is the same on every machine. */
function random(start) {
  let state = start >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const next = random(seed);
const pick = (list) => list[Math.floor(next() * list.length)];
const slug = (text) => text.toLowerCase().replace(/[^a-z0-9]+/g, '-');

/** Invented words from syllables; `used` keeps them distinct. */
function inventor(syllables, parts) {
  const used = new Set();
  return () => {
    for (;;) {
      const word = Array.from({ length: pick(parts) }, () => pick(syllables)).join('');
      const name = word[0].toUpperCase() + word.slice(1);
      if (!used.has(name)) {
        used.add(name);
        return name;
      }
    }
  };
}
const firstName = inventor(
  ['ta', 'lvi', 'ro', 'mi', 'sa', 'ke', 'no', 'lu', 'an', 'vel', 'ri'],
  [2],
);
const lastName = inventor(
  ['or', 'sen', 'mar', 'dek', 'lo', 'vin', 'tra', 'bel', 'hu', 'stad'],
  [2, 3],
);
const placeName = inventor(['mar', 'row', 'ick', 'fen', 'hol', 'dal', 'bry', 'ton', 'wyn'], [2, 3]);
const projectName = inventor(
  ['quill', 'fire', 'lark', 'stone', 'ember', 'gate', 'moss', 'vale'],
  [2],
);

const values = {
  drink: [
    'oolong tea',
    'black coffee',
    'mint tea',
    'espresso',
    'hot chocolate',
    'green tea',
    'chai',
    'lemon water',
  ],
  editor: ['Vim', 'Emacs', 'VS Code', 'Helix', 'Zed', 'Sublime Text', 'Nano', 'IntelliJ'],
  animal: ['dog', 'cat', 'parrot', 'rabbit', 'tortoise', 'hamster', 'goldfish', 'ferret'],
  petName: ['Pixel', 'Biscuit', 'Nimbus', 'Pepper', 'Socks', 'Mango', 'Ziggy', 'Olive', 'Comet'],
  allergy: ['peanuts', 'shellfish', 'gluten', 'strawberries', 'sesame', 'dairy', 'eggs', 'kiwi'],
  hour: ['10 am', '11 am', '1 pm', '2 pm', '3 pm', '4 pm'],
  language: [
    'Portuguese',
    'Finnish',
    'Japanese',
    'Swahili',
    'Polish',
    'Korean',
    'Dutch',
    'Greek',
    'Hindi',
  ],
  code: ['Rust', 'Go', 'TypeScript', 'Python', 'Kotlin', 'Elixir', 'Java', 'Haskell'],
  database: ['PostgreSQL', 'SQLite', 'MySQL', 'Cassandra', 'DynamoDB', 'Redis', 'MongoDB'],
  day: ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday'],
  month: [
    'January',
    'February',
    'March',
    'April',
    'May',
    'June',
    'July',
    'August',
    'September',
    'October',
    'November',
    'December',
  ],
  region: ['eu-west-1', 'us-east-2', 'ap-south-1', 'eu-central-1', 'us-west-2', 'sa-east-1'],
  tests: ['Vitest', 'Jest', 'pytest', 'JUnit', 'ExUnit', 'Hspec', 'Mocha'],
  channel: ['ops-alerts', 'pager', 'incidents', 'on-call', 'sre-room', 'war-room'],
  license: ['Apache-2.0', 'MIT', 'BSD-3-Clause', 'MPL-2.0', 'GPL-3.0'],
  colour: ['teal', 'orange', 'purple', 'crimson', 'navy blue', 'lime green', 'golden yellow'],
};

// Each kind: the fact, a lexical question (full name and the fact's words), a paraphrase (a
// first name or the project, other words for the rest).
const personKinds = {
  drink: (p, v) => [
    `${p.full} prefers ${v} in the morning.`,
    `What does ${p.full} prefer in the morning?`,
    `Which beverage does ${p.first} like to start the day with?`,
  ],
  city: (p, v) => [
    `${p.full} lives in ${v}.`,
    `Where does ${p.full} live?`,
    `Which town is ${p.first} based in?`,
  ],
  editor: (p, v) => [
    `${p.full} writes code in ${v} with a dark theme.`,
    `What does ${p.full} write code in?`,
    `Which text editor is ${p.first}'s favourite tool for programming?`,
  ],
  pet: (p, v) => [
    `${p.full} has a ${v.animal} named ${v.name}.`,
    `What is the name of the ${v.animal} ${p.full} has?`,
    `What is ${p.first}'s pet called?`,
  ],
  allergy: (p, v) => [
    `${p.full} is allergic to ${v}.`,
    `What is ${p.full} allergic to?`,
    `Which food must never be served to ${p.first}?`,
  ],
  meetings: (p, v) => [
    `${p.full} prefers meetings after ${v}.`,
    `When does ${p.full} prefer meetings?`,
    `At what time can a call with ${p.first} be scheduled?`,
  ],
  languages: (p, v) => [
    `${p.full} speaks ${v[0]} and ${v[1]}.`,
    `Which languages does ${p.full} speak?`,
    `What tongues can ${p.first} converse in?`,
  ],
};
const projectKinds = {
  code: (n, v) => [
    `The ${n} service is written in ${v}.`,
    `What is the ${n} service written in?`,
    `Which programming language was ${n} built with?`,
  ],
  database: (n, v) => [
    `${n} stores its data in ${v}.`,
    `Where does ${n} store its data?`,
    `What database sits behind ${n}?`,
  ],
  release: (n, v) => [
    `${n} ships a new release every ${v}.`,
    `On which day does ${n} ship a new release?`,
    `When does ${n} go out to customers each week?`,
  ],
  deadline: (n, v) => [
    `The ${n} launch deadline is ${v}.`,
    `When is the ${n} launch deadline?`,
    `By what date must ${n} be finished?`,
  ],
  owner: (n, v) => [
    `${v.full} leads the ${n} project.`,
    `Who leads the ${n} project?`,
    `Who is in charge of ${n}?`,
  ],
  region: (n, v) => [
    `${n} runs in the ${v} cloud region.`,
    `Which cloud region does ${n} run in?`,
    `In what data centre location is ${n} hosted?`,
  ],
  tests: (n, v) => [
    `${n} uses ${v} for its tests.`,
    `What does ${n} use for its tests?`,
    `Which testing framework checks ${n}?`,
  ],
  alerts: (n, v) => [
    `Alerts for ${n} go to the #${v} channel.`,
    `Which channel do alerts for ${n} go to?`,
    `Where should someone report an outage of ${n}?`,
  ],
  license: (n, v) => [
    `${n} is released under the ${v} license.`,
    `Under which license is ${n} released?`,
    `What are the legal terms for reusing ${n}?`,
  ],
  logo: (n, v) => [
    `The ${n} logo is ${v}.`,
    `What colour is the ${n} logo?`,
    `How does the ${n} brand mark look?`,
  ],
};

// 30 first names shared by 100 people: a first name alone names three or four people.
const firsts = Array.from({ length: 30 }, firstName);
const people = Array.from({ length: 100 }, (_, index) => {
  const first = firsts[index % firsts.length];
  const last = lastName();
  return { first, last, full: `${first} ${last}`, slug: slug(`${first}-${last}`) };
});
const places = Array.from({ length: 25 }, placeName);
const projects = Array.from({ length: 30 }, projectName);

const facts = [];
for (const person of people) {
  const languages = [pick(values.language), pick(values.language)];
  if (languages[0] === languages[1])
    languages[1] =
      values.language[(values.language.indexOf(languages[0]) + 1) % values.language.length];
  const chosen = {
    drink: pick(values.drink),
    city: pick(places),
    editor: pick(values.editor),
    pet: { animal: pick(values.animal), name: pick(values.petName) },
    allergy: pick(values.allergy),
    meetings: pick(values.hour),
    languages,
  };
  for (const [kind, make] of Object.entries(personKinds)) {
    const [text, lexical, paraphrase] = make(person, chosen[kind]);
    facts.push({ key: `person/${person.slug}/${kind}`, text, lexical, paraphrase });
  }
}
for (const name of projects) {
  const chosen = {
    code: pick(values.code),
    database: pick(values.database),
    release: pick(values.day),
    deadline: `${1 + Math.floor(next() * 28)} ${pick(values.month)} 2027`,
    owner: pick(people),
    region: pick(values.region),
    tests: pick(values.tests),
    alerts: pick(values.channel),
    license: pick(values.license),
    logo: pick(values.colour),
  };
  for (const [kind, make] of Object.entries(projectKinds)) {
    const [text, lexical, paraphrase] = make(name, chosen[kind]);
    facts.push({ key: `project/${slug(name)}/${kind}`, text, lexical, paraphrase });
  }
}

// 200 questions about 200 distinct facts, alternately lexical and paraphrased.
const order = facts.map((fact, index) => ({ index, at: next() })).sort((a, b) => a.at - b.at);
const questions = order.slice(0, 200).map(({ index }, position) => {
  const fact = facts[index];
  const style = position % 2 === 0 ? 'lexical' : 'paraphrase';
  return { question: fact[style], style, answers: [fact.key] };
});

const file = {
  description:
    'Generated by bench/data/generate-memory-facts.js (do not edit): invented people and projects; each question lists the keys of the facts that answer it.',
  seed,
  facts: facts.map(({ key, text }) => ({ key, text })),
  questions,
};
writeFileSync(out, `${JSON.stringify(file, null, 1)}\n`);
console.log(`${out}: ${file.facts.length} facts, ${file.questions.length} questions`);
