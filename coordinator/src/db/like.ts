/** `s` as a literal inside a LIKE/ILIKE pattern: `\`, `%` and `_` escaped with PostgreSQL's default escape character. */
export const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);
