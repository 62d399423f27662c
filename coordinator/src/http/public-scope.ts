import type { FastifyInstance } from 'fastify';

const kPublicScope = Symbol('sonar.publicScope');

/**
 * Marks every route registered from now on in this (encapsulated) instance and its children as
 * public. Only for third-party plugins whose route options cannot carry `config.auth` (the
 * OpenAPI UI); own routes declare `config: { auth: 'public' }` one by one. The deny-by-default
 * check (accounts/auth-plugin.ts, enforceRouteAuth) reads the mark with isPublicScope.
 */
export function declarePublicScope(instance: FastifyInstance) {
  (instance as unknown as Record<symbol, boolean>)[kPublicScope] = true;
}

/** Whether declarePublicScope marked this instance (or the parent it inherits from). */
export function isPublicScope(instance: FastifyInstance): boolean {
  return (instance as unknown as Record<symbol, boolean>)[kPublicScope] === true;
}
