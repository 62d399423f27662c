/**
 * The committed migrations' names in order, without loading them (index.ts checks at load that
 * its list matches): the admin CLI compares them with the migrations table to tell whether the
 * schema is current without starting MikroORM's Migrator. Add a new migration in both files.
 */
export const MIGRATION_NAMES = [
  'Migration20261121000100Accounts',
  'Migration20261121000200SpeechWorkers',
  'Migration20261121000300SpeechJobs',
  'Migration20261121000400SpeechIntegrations',
  'Migration20261121000500DnsZones',
  'Migration20261121000600Irc',
  'Migration20261121000700IrcSearch',
  'Migration20261124000800SpeechJobState',
  'Migration20261124000900UserTokenVersion',
  'Migration20261124001000DiarizationRevisions',
  'Migration20261125001400IrcImportBatches',
  'Migration20261124001200AppSettings',
  'Migration20261124001500SpamProfiles',
  'Migration20261125001100SpeechAi',
  'Migration20261125001700DyndnsReputation',
  'Migration20261125001800StatuspagesGuestbooks',
  'Migration20261125002100IrcChannelDays',
  'Migration20261125002000DnsCachePaging',
  'Migration20261125001600Assistant',
  'Migration20261125001900DnsProviders',
  'Migration20261125002200DnsCachePartitions',
  'Migration20261125002300IrcTermPairs',
  'Migration20261127002400SegmentWords',
  'Migration20261127002500IrcSearchText',
  'Migration20261207002600DiarizationSpeakers',
  'Migration20261208002700SharePlayback',
  'Migration20261208002800TranscriptEdits',
  'Migration20261208002900TranscriptFile',
] as const;
