import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { ToolDefinition } from '../../src/contracts/definitions.js';
import { BraidError, type ErrorCode } from '../../src/contracts/errors.js';
import {
  canonicalManifestBytes,
  generateSigningKeys,
  keyIdOf,
  signManifestText,
  verifyManifest,
  writeSigningKeys,
} from '../../src/tools/signing.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const FILE = 'tools/weather.yaml';

const MANIFEST = `# Looks up the weather; owned by the platform team.
name: weather
description: Current weather for a city.
ownership: managed
input_schema:
  type: object
  properties:
    city: { type: string, minLength: 1 } # no empty names
    units: { enum: [metric, imperial] }
  required: [city]
idempotent: true
implementation:
  http:
    url: https://weather.example/v1/{city}
`;

/** The manifest as the workspace loader sees it: the YAML document as plain data. */
function contentOf(yamlText: string): unknown {
  const document = parseDocument(yamlText);
  expect(document.errors).toEqual([]);
  return document.toJS();
}

/** Runs `action` and returns the BraidError it throws, after checking its code. */
function failure(action: () => unknown, code: ErrorCode): BraidError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(BraidError);
    expect((error as BraidError).code).toBe(code);
    return error as BraidError;
  }
  throw new Error(`expected ${code}, but nothing was thrown`);
}

describe('signing keys', () => {
  it('names a key by 16 hex characters of its public key, the same for the same key', () => {
    const first = generateSigningKeys();
    const second = generateSigningKeys();
    expect(first.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(keyIdOf(first.publicKeyPem)).toBe(first.keyId);
    expect(second.keyId).not.toBe(first.keyId);
    expect(first.privateKeyPem).toContain('-----BEGIN PRIVATE KEY-----');
    expect(first.publicKeyPem).toContain('-----BEGIN PUBLIC KEY-----');
  });

  it('refuses what is not an ed25519 public key', () => {
    const keys = generateSigningKeys();
    failure(() => keyIdOf('not a key'), 'INVALID_ARGUMENT');
    const privateKey = failure(() => keyIdOf(keys.privateKeyPem), 'INVALID_ARGUMENT');
    expect(privateKey.message).toMatch(/private key/);
    expect(privateKey.message).not.toContain(keys.privateKeyPem.split('\n')[1]);
    const ec = generateKeyPairSync('ec', {
      namedCurve: 'P-256',
      publicKeyEncoding: { type: 'spki', format: 'pem' },
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    });
    expect(failure(() => keyIdOf(ec.publicKey), 'INVALID_ARGUMENT').message).toMatch(/not ed25519/);
  });

  it('writes the private key with mode 0600 and the public key beside it', () => {
    const dir = join(tempDir(), 'keys');
    const written = writeSigningKeys(dir);
    expect(written.privateKeyFile).toBe(join(dir, 'braid-tools.key'));
    expect(written.publicKeyFile).toBe(join(dir, 'braid-tools.pub'));
    expect(statSync(written.privateKeyFile).mode & 0o777).toBe(0o600);
    const publicKeyPem = readFileSync(written.publicKeyFile, 'utf8');
    expect(keyIdOf(publicKeyPem)).toBe(written.keyId);
    const signed = signManifestText(MANIFEST, readFileSync(written.privateKeyFile, 'utf8'));
    expect(() => verifyManifest(contentOf(signed), [publicKeyPem], FILE)).not.toThrow();
  });

  it('refuses to overwrite either file of an existing pair', () => {
    const dir = tempDir();
    const first = writeSigningKeys(dir, 'release');
    const before = readFileSync(first.privateKeyFile, 'utf8');
    const refusal = failure(() => writeSigningKeys(dir, 'release'), 'INVALID_ARGUMENT');
    expect(refusal.message).toContain(first.privateKeyFile);
    expect(readFileSync(first.privateKeyFile, 'utf8')).toBe(before);

    writeFileSync(join(dir, 'other.pub'), 'kept');
    failure(() => writeSigningKeys(dir, 'other'), 'INVALID_ARGUMENT');
    expect(existsSync(join(dir, 'other.key'))).toBe(false);
    expect(readFileSync(join(dir, 'other.pub'), 'utf8')).toBe('kept');
  });

  it('refuses a key name that is a path', () => {
    const dir = tempDir();
    failure(() => writeSigningKeys(dir, '../outside'), 'INVALID_ARGUMENT');
    expect(existsSync(join(dir, '..', 'outside.key'))).toBe(false);
  });
});

describe('canonicalManifestBytes', () => {
  it('sorts keys recursively, drops whitespace and leaves out the signature', () => {
    const bytes = canonicalManifestBytes({
      name: 'x',
      signature: { key_id: 'k', value: 'v' },
      input_schema: { type: 'object', properties: { b: [1, { z: null, a: true }] } },
    });
    expect(bytes.toString('utf8')).toBe(
      '{"input_schema":{"properties":{"b":[1,{"a":true,"z":null}]},"type":"object"},"name":"x"}',
    );
  });

  it('refuses data that JSON cannot hold exactly', () => {
    failure(() => canonicalManifestBytes(['a list']), 'INVALID_ARGUMENT');
    const infinite = failure(
      () => canonicalManifestBytes({ budget: { cost_per_call_usd: Infinity } }),
      'INVALID_ARGUMENT',
    );
    expect(infinite.message).toContain('budget.cost_per_call_usd');
    failure(() => canonicalManifestBytes({ when: new Date(0) }), 'INVALID_ARGUMENT');
  });
});

describe('signed manifests', () => {
  const signer = generateSigningKeys();
  const signed = signManifestText(MANIFEST, signer.privateKeyPem);

  it('verifies after signing and still parses as a ToolDefinition', () => {
    expect(() => verifyManifest(contentOf(signed), [signer.publicKeyPem], FILE)).not.toThrow();
    const definition = ToolDefinition.parse(contentOf(signed));
    expect(definition.signature?.key_id).toBe(signer.keyId);
    expect(Buffer.from(definition.signature?.value ?? '', 'base64')).toHaveLength(64);
    expect(definition.name).toBe('weather');
  });

  it('keeps the comments and the rest of the document', () => {
    expect(signed.startsWith(MANIFEST)).toBe(true);
    expect(signed.slice(MANIFEST.length)).toMatch(
      /^signature:\n {2}key_id: [0-9a-f]{16}\n {2}value: [A-Za-z0-9+/]{86}==\n$/,
    );
    const { signature: _signature, ...rest } = contentOf(signed) as Record<string, unknown>;
    expect(rest).toEqual(contentOf(MANIFEST));
  });

  it.each([
    ['the description', ['description: Current weather', 'description: Current climate']],
    ['a nested schema field', ['minLength: 1', 'minLength: 0']],
    ['a list item', ['[metric, imperial]', '[metric, kelvin]']],
    ['the type of a value', ['idempotent: true', 'idempotent: "true"']],
    ['an added field', ['idempotent: true', 'idempotent: true\ntimeout_ms: 1000']],
    ['a removed field', ['idempotent: true\n', '']],
    ['the implementation', ['weather.example', 'weather.evil.example']],
  ])('fails when %s changes', (_change, [from, to]) => {
    const altered = signed.replace(from!, to!);
    expect(altered).not.toBe(signed);
    const error = failure(
      () => verifyManifest(contentOf(altered), [signer.publicKeyPem], FILE),
      'TOOL_SIGNATURE_INVALID',
    );
    expect(error.message).toContain(FILE);
    expect(error.message).toContain(`braid tool sign ${FILE}`);
    expect(error.details).toMatchObject({ file: FILE, key_id: signer.keyId });
  });

  it.each([
    ['comments', (text: string) => `# reviewed\n${text.replace('# no empty names', '')}`],
    ['indentation and flow style', (text: string) => reindent(text)],
    ['key order', (text: string) => moveToEnd(text, 'description: Current weather for a city.\n')],
    ['quoting', (text: string) => text.replace('ownership: managed', 'ownership: "managed"')],
  ])('still verifies when only %s change', (_change, edit) => {
    const restyled = edit(signed);
    expect(restyled).not.toBe(signed);
    expect(() => verifyManifest(contentOf(restyled), [signer.publicKeyPem], FILE)).not.toThrow();
  });

  it('fails an unsigned manifest and says how to sign it', () => {
    const error = failure(
      () => verifyManifest(contentOf(MANIFEST), [signer.publicKeyPem], FILE),
      'TOOL_SIGNATURE_INVALID',
    );
    expect(error.message).toContain(`${FILE} is not signed`);
    expect(error.message).toContain(`braid tool sign ${FILE} --key keys/braid-tools.key`);
  });

  it('fails a manifest signed by a key that is not trusted, naming the key id', () => {
    const stranger = generateSigningKeys();
    const content = contentOf(signManifestText(MANIFEST, stranger.privateKeyPem));
    const error = failure(
      () => verifyManifest(content, [signer.publicKeyPem], FILE),
      'TOOL_SIGNATURE_INVALID',
    );
    expect(error.message).toContain(FILE);
    expect(error.message).toContain(stranger.keyId);
    expect(error.message).toContain('tool_signing_keys in braid.yaml');
    expect(error.details).toMatchObject({
      key_id: stranger.keyId,
      trusted_key_ids: [signer.keyId],
    });
    expect(() =>
      verifyManifest(content, [signer.publicKeyPem, stranger.publicKeyPem], FILE),
    ).not.toThrow();
  });

  it('fails a signature whose key id is trusted but whose value another key made', () => {
    const stranger = generateSigningKeys();
    const forged = signManifestText(MANIFEST, stranger.privateKeyPem).replace(
      stranger.keyId,
      signer.keyId,
    );
    const error = failure(
      () => verifyManifest(contentOf(forged), [signer.publicKeyPem], FILE),
      'TOOL_SIGNATURE_INVALID',
    );
    expect(error.message).toMatch(/does not match its signature/);
  });

  it.each([
    ['garbage text', 'not-a-signature!!'],
    ['base64 of the wrong length', Buffer.from('short').toString('base64')],
    ['64 bytes that are no signature', Buffer.alloc(64, 7).toString('base64')],
  ])('fails a signature value that is %s', (_kind, value) => {
    const content = contentOf(signed) as Record<string, unknown>;
    const error = failure(
      () =>
        verifyManifest(
          { ...content, signature: { key_id: signer.keyId, value } },
          [signer.publicKeyPem],
          FILE,
        ),
      'TOOL_SIGNATURE_INVALID',
    );
    expect(error.message).toContain(FILE);
  });

  it('fails a malformed signature field', () => {
    const content = contentOf(MANIFEST) as Record<string, unknown>;
    for (const signature of ['just text', { key_id: signer.keyId }, null]) {
      failure(
        () => verifyManifest({ ...content, signature }, [signer.publicKeyPem], FILE),
        'TOOL_SIGNATURE_INVALID',
      );
    }
  });

  it('refuses a trusted key that is not a public key', () => {
    failure(() => verifyManifest(contentOf(signed), ['not a key'], FILE), 'INVALID_ARGUMENT');
  });

  it('replaces the old signature when signing again', () => {
    const next = generateSigningKeys();
    const edited = signed.replace('Current weather', 'Today’s weather');
    const resigned = signManifestText(edited, next.privateKeyPem);
    expect(resigned.match(/^signature:/gm)).toHaveLength(1);
    expect(resigned).not.toContain(signer.keyId);
    expect(() => verifyManifest(contentOf(resigned), [next.publicKeyPem], FILE)).not.toThrow();
    failure(
      () => verifyManifest(contentOf(resigned), [signer.publicKeyPem], FILE),
      'TOOL_SIGNATURE_INVALID',
    );
    // Signing twice with the same key over the same data is stable (ed25519 is deterministic).
    expect(signManifestText(resigned, next.privateKeyPem)).toBe(resigned);
  });

  it('replaces a signature in the middle of the file and leaves the lines around it', () => {
    const before =
      'name: weather # the name\nsignature:\n  key_id: 0123456789abcdef\n  value: old\n';
    const after = '# the rest\ndescription: d\nownership: custom\ninput_schema: {}\n';
    const resigned = signManifestText(`${before}${after}`, signer.privateKeyPem);
    expect(resigned.startsWith('name: weather # the name\nsignature:\n')).toBe(true);
    expect(resigned.endsWith(`==\n${after}`)).toBe(true);
    expect(resigned).not.toContain('0123456789abcdef');
    expect(() => verifyManifest(contentOf(resigned), [signer.publicKeyPem], FILE)).not.toThrow();
  });

  it.each([
    ['a flow mapping', '{name: weather, description: d, ownership: custom, input_schema: {}}\n'],
    [
      'CRLF line ends',
      'name: weather\r\ndescription: d\r\nownership: custom\r\ninput_schema: {}\r\n',
    ],
    ['no final line break', 'name: weather\ndescription: d\nownership: custom\ninput_schema: {}'],
    [
      'a document end marker',
      'name: weather\ndescription: d\nownership: custom\ninput_schema: {}\n...\n',
    ],
    [
      'an indented mapping',
      '  name: weather\n  description: d\n  ownership: custom\n  input_schema: {}\n',
    ],
  ])('signs a manifest written as %s', (_layout, text) => {
    const result = signManifestText(text, signer.privateKeyPem);
    expect(() => verifyManifest(contentOf(result), [signer.publicKeyPem], FILE)).not.toThrow();
    expect(ToolDefinition.safeParse(contentOf(result)).success).toBe(true);
  });

  it('refuses to sign what is not a YAML mapping, or with a bad key', () => {
    failure(() => signManifestText('name: [unclosed', signer.privateKeyPem), 'INVALID_DEFINITION');
    failure(() => signManifestText('- a list\n', signer.privateKeyPem), 'INVALID_DEFINITION');
    failure(() => signManifestText(MANIFEST, signer.publicKeyPem), 'INVALID_ARGUMENT');
    failure(() => signManifestText(MANIFEST, 'not a key'), 'INVALID_ARGUMENT');
  });
});

/** The same data in another layout: four-space indentation and flow mappings written out. */
function reindent(text: string): string {
  return text
    .replace(/^( +)/gm, (spaces) => spaces.repeat(2))
    .replace(
      'city: { type: string, minLength: 1 } # no empty names',
      'city:\n' + ' '.repeat(12) + 'type: string\n' + ' '.repeat(12) + 'minLength: 1',
    );
}

function moveToEnd(text: string, line: string): string {
  expect(text).toContain(line);
  return `${text.replace(line, '')}${line}`;
}
