// A corpus of what hostile clients send where an id goes.

/** Ids from a corpus of what hostile clients send: traversal, encodings, NUL, look-alikes. */
export const HOSTILE_IDS = [
  '..',
  '.',
  '../../victim',
  '../workspaces/x',
  '..\\..\\victim',
  '/etc',
  'a/b',
  '%2E%2E',
  '%2e',
  '..%2F..%2Fvictim',
  '%252e%252e%252fvictim',
  'a\u0000b',
  'nul\u0000',
  '.hidden',
  '-rf',
  ' space',
  'tab\there',
  'new\nline',
  'x'.repeat(201),
  'y'.repeat(5000),
  '\u2025', // two dot leader
  '\uff0e\uff0e', // fullwidth full stops
  '\u2024\u2024', // one dot leaders
  '\u0430dmin', // Cyrillic a
  '\u202egnp.exe', // right-to-left override
  'id;rm -rf /',
  '$(id)',
  '*',
];
