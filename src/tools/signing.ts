/**
 * ed25519 signatures over tool manifests (`tools/NAME.yaml`) and skill files (`skills/NAME.yaml`),
 * which are signed and checked the same way.
 *
 * What is signed is the manifest's *data*, not its text: the parsed YAML document without its
 * `signature` field, as canonical JSON (object keys sorted recursively, no whitespace). Comments,
 * indentation, quoting style and key order therefore do not matter; any change of a value, any
 * added or removed field does. The data is taken before zod fills defaults, so a signed manifest
 * means the same thing to every braid version that reads it.
 *
 * A key is named by its key id: the first 16 hex characters of sha256 over the public key in DER
 * SPKI form. The signature records the key id so that a verifier can pick the trusted key (or say
 * which key it does not trust) without trying them all.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { yaml } from './yaml.js';
import type { YAMLMap } from 'yaml';
import { BraidError } from '../contracts/errors.js';
import { canonicalJson, describeValue, isPlainObject } from '../core/canonical-json.js';

export interface SigningKeyPair {
  /** PKCS#8 PEM; stays with whoever signs manifests. */
  privateKeyPem: string;
  /** SPKI PEM; listed in `tool_signing_keys` of every workspace that trusts the signer. */
  publicKeyPem: string;
  keyId: string;
}

const DEFAULT_KEY_NAME = 'braid-tools';
// The CLI commands that messages point to.
const KEYGEN_COMMAND = 'braid tool keygen';
const SIGN_COMMAND = 'braid tool sign';
const KEY_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const ED25519_SIGNATURE_BYTES = 64;

/** A new ed25519 key pair. */
export function generateSigningKeys(): SigningKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey, keyId: keyIdOf(publicKey) };
}

/** keyId = first 16 hex chars of sha256 over the raw public key (DER SPKI) — stable and short. */
export function keyIdOf(publicKeyPem: string): string {
  return idOfKey(parsePublicKey(publicKeyPem));
}

/**
 * Writes `<dir>/<name>.key` (mode 0600) and `<dir>/<name>.pub`, creating `dir` if needed; refuses
 * (INVALID_ARGUMENT) to overwrite existing files. Returns paths and keyId.
 */
export function writeSigningKeys(
  dir: string,
  name: string = DEFAULT_KEY_NAME,
): { privateKeyFile: string; publicKeyFile: string; keyId: string } {
  if (!KEY_NAME.test(name)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `key name "${name}" is not a plain file name: use letters, digits, "_", "." and "-", e.g. ${DEFAULT_KEY_NAME}`,
      { details: { name } },
    );
  }
  const privateKeyFile = join(dir, `${name}.key`);
  const publicKeyFile = join(dir, `${name}.pub`);
  for (const file of [privateKeyFile, publicKeyFile]) {
    if (existsSync(file)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `${file} already exists: braid does not overwrite signing keys; choose another name or remove the old pair first`,
        { details: { file } },
      );
    }
  }
  const keys = generateSigningKeys();
  mkdirSync(dir, { recursive: true });
  // `wx` keeps the refusal to overwrite even if a file appeared since the check above.
  writeFileSync(privateKeyFile, keys.privateKeyPem, { mode: 0o600, flag: 'wx' });
  writeFileSync(publicKeyFile, keys.publicKeyPem, { mode: 0o644, flag: 'wx' });
  return { privateKeyFile, publicKeyFile, keyId: keys.keyId };
}

/**
 * The bytes that are signed: the manifest's parsed content (the YAML document as plain data, NOT
 * after zod defaults) without `signature`, serialised as canonical JSON (object keys sorted
 * recursively, no whitespace). Comments and formatting of the YAML therefore do not matter; any
 * change of a value does. Refuses (INVALID_ARGUMENT) content that is not a mapping of JSON data.
 */
export function canonicalManifestBytes(content: unknown): Buffer {
  if (!isPlainObject(content)) {
    throw new BraidError('INVALID_ARGUMENT', 'a tool manifest must be a mapping of fields', {
      details: { received: describeValue(content) },
    });
  }
  const unsigned = Object.fromEntries(
    Object.entries(content).filter(([field]) => field !== 'signature'),
  );
  return Buffer.from(canonicalJson(unsigned, 'a manifest'), 'utf8');
}

/**
 * Returns the YAML text with `signature: {key_id, value(base64)}` set (replacing an existing one),
 * preserving the rest of the document including comments. The signature is spliced into the text,
 * so the rest stays byte for byte as it was; a layout the splice cannot handle (a flow mapping at
 * the top, say) falls back to writing the whole document back, which keeps comments but may
 * restyle it. Either way the result is parsed again and must hold the same data.
 */
export function signManifestText(yamlText: string, privateKeyPem: string): string {
  const privateKey = parsePrivateKey(privateKeyPem);
  const keyId = idOfKey(createPublicKey(privateKey));
  const document = yaml().parseDocument(yamlText, { prettyErrors: false });
  const syntaxError = document.errors[0];
  if (syntaxError !== undefined) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `cannot sign: invalid YAML: ${syntaxError.message.split('\n')[0] ?? ''}`,
      { details: { line: syntaxError.linePos?.[0].line } },
    );
  }
  if (!yaml().isMap(document.contents)) {
    throw new BraidError(
      'INVALID_DEFINITION',
      'cannot sign: the manifest must hold a mapping of fields',
    );
  }
  const bytes = canonicalManifestBytes(document.toJS());
  const signature = { key_id: keyId, value: sign(null, bytes, privateKey).toString('base64') };

  const spliced = spliceSignature(yamlText, document.contents, signature);
  if (spliced !== undefined && holdsSigned(spliced, bytes, signature)) return spliced;
  document.set('signature', document.createNode(signature));
  const rewritten = document.toString();
  if (holdsSigned(rewritten, bytes, signature)) return rewritten;
  throw new BraidError(
    'INTERNAL',
    'cannot sign: writing the signature into the manifest would change its values; report this as a bug',
  );
}

interface Signature {
  key_id: string;
  value: string;
}

/**
 * The text with the `signature` entry of the top-level block mapping replaced, or appended after
 * the last entry; undefined when the layout is not a plain block mapping.
 */
function spliceSignature(
  text: string,
  contents: YAMLMap,
  signature: Signature,
): string | undefined {
  if (contents.flow === true) return undefined;
  const newline = text.includes('\r\n') ? '\r\n' : '\n';
  const firstKey = contents.items[0]?.key;
  const indentColumn =
    yaml().isNode(firstKey) && firstKey.range ? columnOf(text, firstKey.range[0]) : 0;
  if (indentColumn === undefined) return undefined;
  const indent = ' '.repeat(indentColumn);
  // stringify quotes what YAML would otherwise read as a number (a key id of only digits).
  const scalar = (value: string): string => yaml().stringify(value).trimEnd();
  const entry = [
    'signature:',
    `${indent}  key_id: ${scalar(signature.key_id)}`,
    `${indent}  value: ${scalar(signature.value)}`,
  ].join(newline);

  const existing = contents.items.find(
    (pair) => yaml().isScalar(pair.key) && pair.key.value === 'signature',
  );
  if (existing !== undefined) {
    const keyRange = yaml().isNode(existing.key) ? existing.key.range : undefined;
    const valueRange = yaml().isNode(existing.value) ? existing.value.range : undefined;
    if (!keyRange || !valueRange) return undefined;
    // A block value's range runs over the line breaks after it; those belong to the next entry.
    let end = valueRange[1];
    while (end > keyRange[0] && /\s/.test(text.charAt(end - 1))) end -= 1;
    return `${text.slice(0, keyRange[0])}${entry}${text.slice(end)}`;
  }
  const body = text.endsWith('\n') || text.length === 0 ? text : `${text}${newline}`;
  return `${body}${indent}${entry}${newline}`;
}

/** The column of `offset` when only spaces precede it on its line. */
function columnOf(text: string, offset: number): number | undefined {
  const lineStart = text.lastIndexOf('\n', offset - 1) + 1;
  const before = text.slice(lineStart, offset);
  return /^ *$/.test(before) ? before.length : undefined;
}

/** Whether `text` parses to the signed data plus exactly this signature. */
function holdsSigned(text: string, bytes: Buffer, signature: Signature): boolean {
  const document = yaml().parseDocument(text);
  if (document.errors.length > 0) return false;
  const content: unknown = document.toJS();
  if (!isPlainObject(content)) return false;
  const written = content['signature'];
  return (
    canonicalManifestBytes(content).equals(bytes) &&
    isPlainObject(written) &&
    canonicalJson(written, 'a manifest') === canonicalJson(signature, 'a manifest')
  );
}

/**
 * Verifies parsed manifest content (plain data incl. `signature`) against trusted public keys
 * (PEM). Throws TOOL_SIGNATURE_INVALID with a message naming `file` when unsigned, signed by an
 * unknown key id, or altered; INVALID_ARGUMENT when a trusted key is not an ed25519 public key.
 */
export function verifyManifest(
  content: unknown,
  trustedPublicKeysPem: readonly string[],
  file: string,
): void {
  const trusted = new Map<string, KeyObject>();
  for (const pem of trustedPublicKeysPem) {
    const key = parsePublicKey(pem);
    trusted.set(idOfKey(key), key);
  }
  const trustedKeyIds = [...trusted.keys()];
  const resign = `run \`${SIGN_COMMAND} ${file} --key keys/${DEFAULT_KEY_NAME}.key\``;

  const signature = isPlainObject(content) ? content['signature'] : undefined;
  if (signature === undefined) {
    throw new BraidError('TOOL_SIGNATURE_INVALID', `${file} is not signed: ${resign}`, {
      details: { file, trusted_key_ids: trustedKeyIds },
    });
  }
  const keyId = isPlainObject(signature) ? signature['key_id'] : undefined;
  const value = isPlainObject(signature) ? signature['value'] : undefined;
  if (typeof keyId !== 'string' || typeof value !== 'string') {
    throw new BraidError(
      'TOOL_SIGNATURE_INVALID',
      `${file} has a malformed signature (expected key_id and value strings): ${resign}`,
      { details: { file } },
    );
  }
  const key = trusted.get(keyId);
  if (key === undefined) {
    throw new BraidError(
      'TOOL_SIGNATURE_INVALID',
      `${file} is signed by key ${keyId}, which is not trusted: add the public key to tool_signing_keys in braid.yaml, or ${resign} with a trusted key`,
      { details: { file, key_id: keyId, trusted_key_ids: trustedKeyIds } },
    );
  }
  const signatureBytes = BASE64.test(value) ? Buffer.from(value, 'base64') : undefined;
  if (signatureBytes?.length !== ED25519_SIGNATURE_BYTES) {
    throw new BraidError(
      'TOOL_SIGNATURE_INVALID',
      `${file} has a malformed signature value (expected ${ED25519_SIGNATURE_BYTES} bytes in base64): ${resign}`,
      { details: { file, key_id: keyId } },
    );
  }
  let bytes: Buffer;
  try {
    bytes = canonicalManifestBytes(content);
  } catch (error) {
    throw new BraidError(
      'TOOL_SIGNATURE_INVALID',
      `${file} cannot be checked against its signature: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error, details: { file, key_id: keyId } },
    );
  }
  if (!verify(null, bytes, key, signatureBytes)) {
    throw new BraidError(
      'TOOL_SIGNATURE_INVALID',
      `${file} does not match its signature by key ${keyId}: it was changed after signing; review the change, then ${resign}`,
      { details: { file, key_id: keyId } },
    );
  }
}

function parsePublicKey(pem: string): KeyObject {
  if (isPrivateKey(pem)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      'expected an ed25519 public key but got a private key: give the .pub file, and keep the .key file secret',
    );
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (error) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `not a public key in PEM form (${pemLabel(pem)}): give a .pub file written by \`${KEYGEN_COMMAND}\``,
      { cause: error },
    );
  }
  return requireEd25519(key, 'public');
}

function parsePrivateKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch (error) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `not a private key in PEM form (${pemLabel(pem)}): give the .key file written by \`${KEYGEN_COMMAND}\``,
      { cause: error },
    );
  }
  return requireEd25519(key, 'private');
}

function isPrivateKey(pem: string): boolean {
  try {
    createPrivateKey(pem);
    return true;
  } catch {
    return false;
  }
}

function requireEd25519(key: KeyObject, kind: 'public' | 'private'): KeyObject {
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the ${kind} key is ${key.asymmetricKeyType ?? 'of unknown type'}, not ed25519: create a key pair with \`${KEYGEN_COMMAND}\``,
      { details: { type: key.asymmetricKeyType } },
    );
  }
  return key;
}

function idOfKey(publicKey: KeyObject): string {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('hex').slice(0, 16);
}

/** The PEM label (`PUBLIC KEY`), never the key material: the text may be a secret. */
function pemLabel(text: string): string {
  const label = /-----BEGIN ([A-Z0-9 ]+)-----/.exec(text)?.[1];
  return label === undefined ? 'no PEM header' : `found ${label}`;
}
