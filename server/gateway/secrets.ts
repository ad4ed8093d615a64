// What the gateway never writes to a capture or a log: credentials a client put in its request
// (docs/security.md, "Gateway"). Headers are never captured at all; body fields whose names say
// they hold a credential are dropped wherever they sit, except inside the messages (content).
const SECRET_NAME =
  /(^|[_-])(api[_-]?key|apikey|secret|password|passwd|authorization|auth[_-]?token|access[_-]?token|bearer|credentials?)($|[_-])/i;

export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

/** A copy of `value` without credential fields (the messages are kept as they are). */
export function withoutSecrets<T>(value: T, depth = 0): T {
  if (depth > 8 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => withoutSecrets(v, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (isSecretName(k)) continue;
    out[k] = k === 'messages' && depth === 0 ? v : withoutSecrets(v, depth + 1);
  }
  return out as T;
}
