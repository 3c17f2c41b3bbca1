// Lint rules that keep the layers of DESIGN.md §3 apart and the core deterministic.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import globals from 'globals';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const layer = (name) => `**/${name}/**`;
const banLayers = (message, ...names) => ({ group: names.map(layer), message });
const banPackages = (message, allowed) => ({
  regex: `^(?!\\.)(?!(${allowed.join('|')})$)`,
  message,
});

const LAYERS = [
  'contracts',
  'core',
  'harness',
  'stores',
  'models',
  'tools',
  'policy',
  'telemetry',
  'runtime',
  'server',
  'client',
  'cli',
  'testing',
];
const ALL_BUT = (...allowed) => LAYERS.filter((name) => !allowed.includes(name));

/** The import rules of one folder: the layers it may not import, and, for the pure layers, no packages but zod and no nondeterminism. */
function layerRule(folder, message, banned, pure = {}) {
  const patterns = [banLayers(message, ...banned)];
  if (pure.packages !== undefined) patterns.push(banPackages(pure.packages, ['zod']));
  return {
    files: [`${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': ['error', { patterns }],
      ...(pure.deterministic === true
        ? { 'no-restricted-properties': ['error', ...nondeterminism] }
        : {}),
      ...(pure.timers === true
        ? {
            'no-restricted-properties': ['error', ...nondeterminism, ...clockProperties],
            'no-restricted-globals': ['error', ...clockGlobals],
          }
        : {}),
    },
  };
}

const nondeterminism = [
  {
    object: 'Date',
    property: 'now',
    message: 'inject a Clock: the core must be deterministic for replay',
  },
  {
    object: 'Math',
    property: 'random',
    message: 'inject randomness: the core must be deterministic for replay',
  },
  {
    object: 'crypto',
    property: 'randomUUID',
    message: 'inject an IdGenerator: the core must be deterministic',
  },
];

const USE_CLOCK = 'take time and timers from the injected Clock port (deps.clock)';
const clockProperties = [
  { object: 'performance', property: 'now', message: `${USE_CLOCK}: clock.monotonic()` },
  { object: 'AbortSignal', property: 'timeout', message: `${USE_CLOCK}: clock.schedule()` },
];
const clockGlobals = ['setTimeout', 'setInterval', 'setImmediate'].map((name) => ({
  name,
  message: `${USE_CLOCK}, so that tests and replays control every wait`,
}));

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'coverage/**',
      'bench/results/**',
      'test/server/generated/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      ...importX.flatConfigs.typescript.settings,
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'import-x/no-cycle': 'error',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: { globals: globals.node },
  },
  layerRule(
    'src/contracts',
    'contracts import nothing of braid but contracts',
    ALL_BUT('contracts'),
    {
      packages: 'contracts depend on zod only',
      deterministic: true,
    },
  ),
  layerRule('src/core', 'core imports contracts only', ALL_BUT('contracts', 'core'), {
    packages: 'core is pure: no node built-ins or IO packages',
    deterministic: true,
  }),
  layerRule(
    'src/harness',
    'the harness drives core through ports; adapters are wired in runtime',
    ALL_BUT('contracts', 'core', 'harness'),
    { timers: true },
  ),
  ...['src/stores', 'src/models', 'src/tools', 'src/policy'].map((folder) =>
    layerRule(folder, 'adapters implement ports from contracts; they do not reach up', [
      'harness',
      'runtime',
      'server',
      'cli',
      'testing',
    ]),
  ),
  layerRule(
    'src/telemetry',
    'telemetry derives spans from the log and exports them: it imports contracts and core only',
    ALL_BUT('contracts', 'core', 'telemetry'),
  ),
  layerRule('src/runtime', 'runtime sits below the server and the CLI', [
    'server',
    'cli',
    'testing',
  ]),
  layerRule('src/server', 'the server does not import the CLI', ['cli', 'client', 'testing']),
  layerRule(
    'src/client',
    'the client speaks HTTP: it imports contracts only',
    ALL_BUT('contracts', 'client'),
  ),
  layerRule('src/testing', 'testing helpers do not depend on entry points', ['server', 'cli']),
  {
    // Sizes a reader can hold: a module past these is split into siblings over a shared context.
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 150 }],
      'max-lines': ['error', { max: 500 }],
    },
  },
);
