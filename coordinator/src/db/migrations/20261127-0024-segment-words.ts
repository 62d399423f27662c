import { Migration } from '@mikro-orm/migrations';

/**
 * Words on transcript segments, and segments split at speaker changes.
 *
 * speech_segments.words: the segment's words (`[{start, end, text}, ...]`) when the worker's engine
 * gave word times; null otherwise. When diarization labels a pass, each word takes a speaker and a
 * segment whose words change speaker is stored as one row per speaker (seq renumbered in order),
 * each row with its own words.
 *
 * source_seq / source_text: on the rows of a split segment, the seq and text of the segment the
 * worker reported (the same on every piece); null on rows that are a whole reported segment. A
 * diarization rerun joins the pieces back from them and splits again with the new turns.
 */
export class Migration20261127002400SegmentWords extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table speech_segments
      add column words jsonb null,
      add column source_seq integer null,
      add column source_text text null;`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table speech_segments drop column if exists words, drop column if exists source_seq, drop column if exists source_text;');
  }
}
