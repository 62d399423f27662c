/** The SQL of spam profiles (spam-service.ts): each owner's allow/deny lists, threshold and extra rules. */
import { sql } from '../../db/sql.js';
import type { ProfileRow } from './spam-service.js';

const COLUMNS = 'id, name, threshold, allow_senders, deny_senders, extra_rules, created_at, updated_at';

type Fields = { name: string; threshold: number; allowSenders: string[]; denySenders: string[]; extraRules: string };
type OwnId = { ownerId: number; id: number };

export const SpamProfiles = {
  list: sql<{ ownerId: number }, ProfileRow>(`select ${COLUMNS} from spam_profiles where owner_id = :ownerId order by name`),
  get: sql<OwnId, ProfileRow>(`select ${COLUMNS} from spam_profiles where owner_id = :ownerId and id = :id`),
  create: sql<{ ownerId: number } & Fields, ProfileRow>(
    `insert into spam_profiles (owner_id, name, threshold, allow_senders, deny_senders, extra_rules)
     values (:ownerId, :name, :threshold, :allowSenders, :denySenders, :extraRules::jsonb) returning ${COLUMNS}`,
  ),
  update: sql<OwnId & Fields, ProfileRow>(
    `update spam_profiles set name = :name, threshold = :threshold, allow_senders = :allowSenders, deny_senders = :denySenders,
            extra_rules = :extraRules::jsonb, updated_at = now()
      where owner_id = :ownerId and id = :id returning ${COLUMNS}`,
  ),
  remove: sql<OwnId>('delete from spam_profiles where owner_id = :ownerId and id = :id'),
};
