import type { Orm } from '../db/orm.js';
import { ChangeNews } from '../infra/change-news.js';

/**
 * News that the chat-log archive changed, for the caches of its answers (IrcSearchCache).
 *
 * One per database connection (per `Orm`): every writer of the archive's tables (the event store
 * behind the importer and the live logger, corrections, the alias table, the common-terms
 * refresh) calls `changed()` once its transaction has committed; every coordinator sharing the
 * database hears it over Redis (ChangeNews).
 */
export class IrcArchiveChanges extends ChangeNews {
  private static readonly byOrm = new WeakMap<Orm, IrcArchiveChanges>();

  /** The archive changes seen through this `Orm` (one instance per `Orm`, so writers need no wiring). */
  static of(orm: Orm): IrcArchiveChanges {
    let changes = IrcArchiveChanges.byOrm.get(orm);
    if (!changes) IrcArchiveChanges.byOrm.set(orm, (changes = new IrcArchiveChanges('irc-archive-changes')));
    return changes;
  }
}
