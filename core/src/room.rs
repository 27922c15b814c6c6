//! Room in the tables that grow with the trace, sized from its rate so far.
//!
//! A table that gains rows as the events are delivered (the loss roots and their places, the
//! lost events and blocks), as the records are indexed (jobs, the blocks the GPU stored) or as
//! a model stores blocks (a Dynamo radix-tree node's blocks and their index) grows by
//! doubling like any `Vec` or hash table, and tables that grow at the same rate double at the
//! same event: at a million events one slice of the page's analysis copied some hundred
//! megabytes (`docs/performance.md`, "The replay's tables in slices"). A whole-trace run knows
//! how many events, records and block hashes it has, so once such a table has [`KNOWN`] rows
//! it gets room for the rows the whole trace would give it at its rate so far, and an eighth
//! more: it is copied while small, and later only if the rate rises. A streaming run (no
//! length known) doubles.

/// Rows from which a table's rate is taken as known.
const KNOWN: usize = 1024;

/// Make room for `more` rows in `v`, which gained its rows over `done` of the run's `total`
/// events, records or block hashes (`total` 0: a streaming run).
pub(crate) fn make_room<T>(v: &mut Vec<T>, more: usize, done: usize, total: usize) {
    if let Some(k) = room_wanted(v.len(), more, v.capacity(), done, total) {
        v.reserve_exact(k);
    }
}

/// The rows to reserve in a table of `n` rows and room for `capacity` that gains `more`, from
/// its rate over `done` of `total`: `None` while it has room, is small, or cannot know
/// (streaming); its own growth (doubling) then applies.
pub(crate) fn room_wanted(
    n: usize,
    more: usize,
    capacity: usize,
    done: usize,
    total: usize,
) -> Option<usize> {
    if n + more <= capacity || n < KNOWN || done == 0 || total <= done {
        return None;
    }
    // At most the rows a table can have at this rate: below `u64` overflow for any trace.
    let projected = (n as u64).saturating_mul(total as u64) / done as u64;
    let want = projected.saturating_add(projected / 8) as usize;
    Some(want.max(n + n / 4).max(n + more) - n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_past_its_known_rows_gets_room_for_the_whole_trace_at_its_rate() {
        // The capacity of a full table of `rows` after `make_room`.
        let room = |rows: usize, more: usize, done: usize, total: usize| {
            let mut v = vec![0u32; rows];
            v.shrink_to_fit();
            make_room(&mut v, more, done, total);
            v.capacity()
        };
        // Small: left to double.
        assert_eq!(room(8, 1, 16, 1_000), 8);
        // 2,048 rows over 4,096 of 1M events: room for ~562k (half a row an event, an eighth
        // more).
        let got = room(2_048, 1, 4_096, 1_000_000);
        assert!((562_000..563_000).contains(&got), "{got}");
        // Streaming (no length): nothing reserved here.
        assert_eq!(room(2_048, 1, 4_096, 0), 2_048);
        // Near the end: at least a quarter more, and the rows asked for.
        let got = room(2_048, 5_000, 999_000, 1_000_000);
        assert!(got >= 7_048, "{got}");
    }
}
