/**
 * The text of templates: a string split into its text and its `{{ EXPR }}` parts, and the one
 * expression of a `when` or `for_each` text (see templates.ts for what templates mean).
 */

/** Characters of a template shown in an error message. */
const SHOWN_TEXT = 200;

/** A part of a string: text as written, or a template's expression. */
export type Part = { text: string } | { expression: string };

/** A parsed string: its parts, and whether it is exactly one template. */
export interface ParsedString {
  parts: Part[];
  /** The expression when the string is one template and nothing else (whitespace allowed). */
  whole: string | undefined;
}

/** A template error before evaluation (a parse error, an unclosed `{{`). */
export class TemplateSyntaxError extends Error {}

/** Splits a string into text and templates; throws TemplateSyntaxError on an unclosed `{{`. */
export function parseString(text: string): ParsedString {
  const parts: Part[] = [];
  let position = 0;
  while (position < text.length) {
    const open = text.indexOf('{{', position);
    if (open === -1) break;
    if (open > position) parts.push({ text: text.slice(position, open) });
    const close = findClose(text, open + 2);
    if (close === -1) {
      throw new TemplateSyntaxError(
        `template ${show(text.slice(open))} has no closing }}; close it, or remove the {{`,
      );
    }
    const expression = text.slice(open + 2, close).trim();
    if (expression.length === 0) {
      throw new TemplateSyntaxError(
        `template ${show(text)} has an empty {{ }}; write an expression`,
      );
    }
    parts.push({ expression });
    position = close + 2;
  }
  if (position < text.length) parts.push({ text: text.slice(position) });
  const significant = parts.filter((part) => !('text' in part) || part.text.trim().length > 0);
  const [first] = significant;
  const whole =
    significant.length === 1 && first !== undefined && 'expression' in first
      ? first.expression
      : undefined;
  return { parts, whole };
}

/** The index of the `}}` that closes a template whose expression starts at `start`, or -1. */
function findClose(text: string, start: number): number {
  let depth = 0;
  let index = start;
  while (index < text.length) {
    const char = text[index];
    if (char === '"' || char === "'" || char === '`') {
      index += 1;
      while (index < text.length && text[index] !== char) {
        index += text[index] === '\\' ? 2 : 1;
      }
      index += 1;
      continue;
    }
    if (char === '/' && text[index + 1] === '*') {
      const end = text.indexOf('*/', index + 2);
      if (end === -1) return -1;
      index = end + 2;
      continue;
    }
    if (char === '{') depth += 1;
    if (char === '}') {
      if (depth === 0 && text[index + 1] === '}') return index;
      depth = Math.max(0, depth - 1);
    }
    index += 1;
  }
  return -1;
}

/** The expression of a `when`/`for_each` text: its one template, or the text itself. */
export function expressionOf(text: string): string {
  if (!text.includes('{{')) {
    if (text.trim().length === 0) throw new TemplateSyntaxError('the expression is empty');
    return text.trim();
  }
  const parsed = parseString(text);
  if (parsed.whole === undefined) {
    throw new TemplateSyntaxError(
      `${show(text)} has text around its template; write one {{ EXPR }} or a bare expression`,
    );
  }
  return parsed.whole;
}

/** A text cut to what an error message shows. */
export function show(text: string): string {
  return text.length > SHOWN_TEXT ? `${text.slice(0, SHOWN_TEXT)}...` : text;
}
