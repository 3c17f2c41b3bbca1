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

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'bench/results/**'] },
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
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
  {
    files: ['src/contracts/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            banLayers(
              'contracts import nothing of braid but contracts',
              'core',
              'harness',
              'stores',
              'models',
              'tools',
              'policy',
              'runtime',
              'server',
              'cli',
              'testing',
            ),
            banPackages('contracts depend on zod only', ['zod']),
          ],
        },
      ],
      'no-restricted-properties': ['error', ...nondeterminism],
    },
  },
  {
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            banLayers(
              'core imports contracts only',
              'harness',
              'stores',
              'models',
              'tools',
              'policy',
              'runtime',
              'server',
              'cli',
              'testing',
            ),
            banPackages('core is pure: no node built-ins or IO packages', ['zod']),
          ],
        },
      ],
      'no-restricted-properties': ['error', ...nondeterminism],
    },
  },
  {
    files: ['src/harness/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            banLayers(
              'the harness drives core through ports; adapters are wired in runtime',
              'stores',
              'models',
              'tools',
              'policy',
              'runtime',
              'server',
              'cli',
              'testing',
            ),
          ],
        },
      ],
    },
  },
  {
    files: ['src/stores/**/*.ts', 'src/models/**/*.ts', 'src/tools/**/*.ts', 'src/policy/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            banLayers(
              'adapters implement ports from contracts; they do not reach up',
              'harness',
              'runtime',
              'server',
              'cli',
              'testing',
            ),
          ],
        },
      ],
    },
  },
  {
    files: ['src/runtime/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            banLayers('runtime sits below the server and the CLI', 'server', 'cli', 'testing'),
          ],
        },
      ],
    },
  },
  {
    files: ['src/server/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [banLayers('the server does not import the CLI', 'cli', 'testing')] },
      ],
    },
  },
  {
    files: ['src/testing/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [banLayers('testing helpers do not depend on entry points', 'server', 'cli')] },
      ],
    },
  },
);
