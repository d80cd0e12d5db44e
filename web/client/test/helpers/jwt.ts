// HS256 JWTs for tests, made with node:crypto: the client never verifies
// them, it only reads `exp`.
import { createHmac } from 'node:crypto';

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/** A JWT of `claims`, signed HS256 with `secret`. */
export function mintJWT(claims: Record<string, unknown>, secret = 'test-secret-of-at-least-32-bytes!!'): string {
  const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const body = b64url(JSON.stringify(claims));
  const sig = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

/** A user token for `sub` expiring at `expMs` (milliseconds since the epoch; `exp` is in seconds). */
export const userToken = (sub: string, expMs: number, extra: Record<string, unknown> = {}) =>
  mintJWT({ sub, exp: Math.floor(expMs / 1000), ...extra });
