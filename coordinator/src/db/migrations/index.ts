import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261121000100Accounts } from './20261121-0001-accounts.js';

/** Committed migrations, applied in order at start. Listed explicitly so they work from src and dist alike. */
export const migrationsList: MigrationObject[] = [
  { name: 'Migration20261121000100Accounts', class: Migration20261121000100Accounts },
];
