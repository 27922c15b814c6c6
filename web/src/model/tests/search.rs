//! The search box's queries over the view-model.

use super::*;

#[test]
fn search_by_field_and_hash() {
    let m = model();
    assert_eq!(m.search(&Query::parse("tier=CPU"), None), Some(2));
    assert_eq!(m.search(&Query::parse("tier=cpu && hash=3"), None), Some(4));
    assert_eq!(
        m.search(&Query::parse("hash=0x0000000000000003"), None),
        Some(4)
    );
    assert_eq!(
        m.search(&Query::parse("tier=GPU"), Some(1)),
        Some(0),
        "wraps around"
    );
    assert_eq!(m.search(&Query::parse("nosuch=1"), None), None);
}

/// Block 2 (child of 1) reaches the CPU tier before 1, then 3 and 4 follow it: llm-d drops 2
/// (its parent is unknown) and 3, 4 with it; SMG indexes them under the wrong parent; the ideal
/// consumer holds 2 until 1 comes.
#[test]
fn search_by_router_verdict() {
    // Hashes of at least 2^32 (llm-d rejects a batch of small integers).
    let h = |k: u64| (1u64 << 32) + k;
    let trace = Trace {
        records: vec![batch(
            0,
            vec![
                stored(h(2), Some(h(1)), "CPU"),
                stored(h(1), None, "CPU"),
                stored(h(3), Some(h(2)), "CPU"),
                stored(h(4), Some(h(3)), "CPU"),
            ],
        )],
    };
    let m = Model::from_trace("v", trace, LaneMode::Tier).unwrap();
    let hits = |q: &str| m.matches(&Query::parse(q));
    assert_eq!(hits("llmd=dropped_orphan"), vec![0, 2, 3]);
    assert_eq!(
        hits("LLM-D=dropped"),
        vec![0, 2, 3],
        "a mark word, any case"
    );
    assert_eq!(hits("llmd=dropped tier=GPU"), Vec::<u32>::new());
    assert_eq!(
        hits("llmd=dropped hash=4294967299"),
        vec![2, 3],
        "its block, its child's parent"
    );
    assert_eq!(hits("ideal=dropped"), Vec::<u32>::new());
    assert_eq!(hits("ideal=replayed"), vec![0]);
    assert_eq!(hits("verdict=replayed"), vec![0], "any router");
    assert_eq!(hits("smg=misrooted"), vec![0, 2, 3]);
    assert_eq!(hits("rule=in-job"), vec![0]);
    assert_eq!(hits("rule=consumer-loss"), vec![0, 2, 3]);
    assert!(hits("llmd=gone").is_empty(), "not a verdict: nothing");
    assert!(hits("colour=red").is_empty(), "an unknown field: nothing");
    // Each unusable term says why; the first one is kept.
    for (q, why) in [
        ("llmd=gone", ("llmd=gone", "not a verdict")),
        ("Colour=red llmd=gone", ("Colour=red", "unknown field")),
        ("seq=x", ("seq=x", "not a number")),
        ("hash=#1", ("hash=#1", "not a hash")),
        ("verdict=nope", ("verdict=nope", "not a verdict")),
    ] {
        assert_eq!(Query::parse(q).problem(), Some(why), "{q}");
    }
    assert_eq!(Query::parse("llmd=dropped seq=3 hash=0x1f").problem(), None);
}

#[test]
fn search_by_full_prefix_or_shortened_hash() {
    let (a, b) = (12_345_678_901_234_567_890u64, 12_345_600_000_000_567_890u64);
    let trace = Trace {
        records: vec![batch(
            0,
            vec![
                stored(a, None, "CPU"),
                stored(b, None, "CPU"),
                stored(7, Some(a), "CPU"),
            ],
        )],
    };
    let m = Model::from_trace("h", trace, LaneMode::Tier).unwrap();
    let hits = |q: &str| m.matches(&Query::parse(q));
    assert_eq!(
        hits(&format!("hash={a}")),
        vec![0, 2],
        "a block or a parent"
    );
    assert_eq!(
        hits("hash=123456…567890"),
        vec![0, 1, 2],
        "as the page shortens it"
    );
    assert_eq!(hits("hash=123456...567890"), vec![0, 1, 2]);
    assert_eq!(hits("hash=1234567"), vec![0, 2], "a prefix");
    assert_eq!(hits(&format!("hash=0x{b:x}")), vec![1]);
    assert_eq!(
        hits("123456…567890 && hash=1234560"),
        vec![1],
        "free text, and a field"
    );
    assert_eq!(hits("hash=7"), vec![2]);
    assert_eq!(
        hits("7"),
        Vec::<u32>::new(),
        "free text needs 4 characters to mean a hash"
    );
}

#[test]
fn next_and_previous_match_wrap_and_the_note_counts() {
    let ms = [2, 5, 9];
    assert_eq!(next_match(&ms, None, true), Some(2));
    assert_eq!(next_match(&ms, Some(2), true), Some(5));
    assert_eq!(next_match(&ms, Some(6), true), Some(9));
    assert_eq!(next_match(&ms, Some(9), true), Some(2), "wraps");
    assert_eq!(next_match(&ms, Some(5), false), Some(2));
    assert_eq!(next_match(&ms, Some(2), false), Some(9), "wraps back");
    assert_eq!(next_match(&ms, None, false), Some(9));
    assert_eq!(next_match(&[], Some(1), true), None);
    let q = Query::parse("tier=CPU");
    assert_eq!(match_note(&q, &ms, Some(5)), "2 of 3 matches");
    assert_eq!(match_note(&q, &ms, Some(4)), "3 matches");
    assert_eq!(match_note(&q, &[4], Some(4)), "1 of 1 match");
    assert_eq!(match_note(&q, &[], None), "no match");
    assert_eq!(
        match_note(&Query::parse("tier=CPU colour=red"), &[], None),
        "no match: colour=red: unknown field"
    );
    assert_eq!(match_note(&Query::parse(""), &[], None), "");
}
