import type { NickProfile } from './alias-service.js';
import type { DateAggregate, LogPage, LogSearch } from './archive-service.js';

/** `/logs` rows: the documented fields (docs/chat-logs.md) plus target, to_nick, network_id and collapsed-burst details. */
export function presentLogPage(search: LogSearch, page: LogPage) {
  return {
    success: true as const,
    source: search.source,
    total: page.total,
    limit: search.limit,
    offset: search.offset,
    results: page.results,
    nick_profile: page.nickProfile,
  };
}

/** `/logs?aggregate=dates`: the distinct-day count and span of the matching rows instead of rows. */
export function presentDates(search: LogSearch, dates: DateAggregate, profile: NickProfile | null) {
  return {
    success: true as const,
    source: search.source,
    aggregate: 'dates' as const,
    total: dates.total,
    date_count: dates.date_count,
    first_date: dates.first_date,
    last_date: dates.last_date,
    span_days: dates.span_days,
    nick_profile: profile,
  };
}
