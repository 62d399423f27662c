import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261121000100Accounts } from './20261121-0001-accounts.js';
import { Migration20261121000200SpeechWorkers } from './20261121-0002-speech-workers.js';
import { Migration20261121000300SpeechJobs } from './20261121-0003-speech-jobs.js';
import { Migration20261121000400SpeechIntegrations } from './20261121-0004-speech-integrations.js';
import { Migration20261121000500DnsZones } from './20261121-0005-dns-zones.js';
import { Migration20261121000600Irc } from './20261121-0006-irc.js';
import { Migration20261121000700IrcSearch } from './20261121-0007-irc-search.js';
import { Migration20261124000800SpeechJobState } from './20261124-0008-speech-job-state.js';
import { Migration20261124000900UserTokenVersion } from './20261124-0009-user-token-version.js';
import { Migration20261124001000DiarizationRevisions } from './20261124-0010-diarization-revisions.js';
import { Migration20261125001400IrcImportBatches } from './20261125-0014-irc-import-batches.js';
import { Migration20261124001200AppSettings } from './20261124-0012-app-settings.js';
import { Migration20261124001500SpamProfiles } from './20261124-0015-spam-profiles.js';
import { Migration20261125001100SpeechAi } from './20261125-0011-speech-ai.js';
import { Migration20261125001700DyndnsReputation } from './20261125-0017-dyndns-reputation.js';
import { Migration20261125001800StatuspagesGuestbooks } from './20261125-0018-statuspages-guestbooks.js';
import { Migration20261125002100IrcChannelDays } from './20261125-0021-irc-channel-days.js';
import { Migration20261125002000DnsCachePaging } from './20261125-0020-dns-cache-paging.js';
import { Migration20261125001600Assistant } from './20261125-0016-assistant.js';
import { Migration20261125001900DnsProviders } from './20261125-0019-dns-providers.js';
import { Migration20261125002200DnsCachePartitions } from './20261125-0022-dns-cache-partitions.js';
import { Migration20261125002300IrcTermPairs } from './20261125-0023-irc-term-pairs.js';
import { Migration20261127002400SegmentWords } from './20261127-0024-segment-words.js';
import { Migration20261127002500IrcSearchText } from './20261127-0025-irc-search-text.js';
import { Migration20261207002600DiarizationSpeakers } from './20261207-0026-diarization-speakers.js';
import { Migration20261208002700SharePlayback } from './20261208-0027-share-playback.js';
import { Migration20261208002800TranscriptEdits } from './20261208-0028-transcript-edits.js';
import { Migration20261208002900TranscriptFile } from './20261208-0029-transcript-file.js';
import { MIGRATION_NAMES } from './names.js';

/** Committed migrations, applied in order at start. Listed explicitly so they work from src and dist alike. */
export const migrationsList: MigrationObject[] = [
  { name: 'Migration20261121000100Accounts', class: Migration20261121000100Accounts },
  { name: 'Migration20261121000200SpeechWorkers', class: Migration20261121000200SpeechWorkers },
  { name: 'Migration20261121000300SpeechJobs', class: Migration20261121000300SpeechJobs },
  { name: 'Migration20261121000400SpeechIntegrations', class: Migration20261121000400SpeechIntegrations },
  { name: 'Migration20261121000500DnsZones', class: Migration20261121000500DnsZones },
  { name: 'Migration20261121000600Irc', class: Migration20261121000600Irc },
  { name: 'Migration20261121000700IrcSearch', class: Migration20261121000700IrcSearch },
  { name: 'Migration20261124000800SpeechJobState', class: Migration20261124000800SpeechJobState },
  { name: 'Migration20261124000900UserTokenVersion', class: Migration20261124000900UserTokenVersion },
  { name: 'Migration20261124001000DiarizationRevisions', class: Migration20261124001000DiarizationRevisions },
  { name: 'Migration20261125001400IrcImportBatches', class: Migration20261125001400IrcImportBatches },
  { name: 'Migration20261124001200AppSettings', class: Migration20261124001200AppSettings },
  { name: 'Migration20261124001500SpamProfiles', class: Migration20261124001500SpamProfiles },
  { name: 'Migration20261125001100SpeechAi', class: Migration20261125001100SpeechAi },
  { name: 'Migration20261125001700DyndnsReputation', class: Migration20261125001700DyndnsReputation },
  { name: 'Migration20261125001800StatuspagesGuestbooks', class: Migration20261125001800StatuspagesGuestbooks },
  { name: 'Migration20261125002100IrcChannelDays', class: Migration20261125002100IrcChannelDays },
  { name: 'Migration20261125002000DnsCachePaging', class: Migration20261125002000DnsCachePaging },
  { name: 'Migration20261125001600Assistant', class: Migration20261125001600Assistant },
  { name: 'Migration20261125001900DnsProviders', class: Migration20261125001900DnsProviders },
  { name: 'Migration20261125002200DnsCachePartitions', class: Migration20261125002200DnsCachePartitions },
  { name: 'Migration20261125002300IrcTermPairs', class: Migration20261125002300IrcTermPairs },
  { name: 'Migration20261127002400SegmentWords', class: Migration20261127002400SegmentWords },
  { name: 'Migration20261127002500IrcSearchText', class: Migration20261127002500IrcSearchText },
  { name: 'Migration20261207002600DiarizationSpeakers', class: Migration20261207002600DiarizationSpeakers },
  { name: 'Migration20261208002700SharePlayback', class: Migration20261208002700SharePlayback },
  { name: 'Migration20261208002800TranscriptEdits', class: Migration20261208002800TranscriptEdits },
  { name: 'Migration20261208002900TranscriptFile', class: Migration20261208002900TranscriptFile },
];

if (migrationsList.map((m) => m.name).join() !== MIGRATION_NAMES.join()) {
  throw new Error('db/migrations/names.ts must list the migrations of db/migrations/index.ts, in the same order');
}
