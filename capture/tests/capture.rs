//! Capture against a real ZMQ peer speaking vLLM's publisher protocol (`tests/zmq/publisher.py`).
//! Every run is bounded by `--max-batches` and a duration; the peer is killed on drop.

mod common;

use std::time::Duration;

use common::{capture, capture_for, Captured, Peer};
use kvscope_capture::StopReason;
use kvscope_capture::{CaptureConfig, Diagnostic};
use kvscope_core::event::KvEvent;
use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{SeqGap, TraceRecord};
use kvscope_core::wire::{msgpack, EventEncoding};

/// The peer's hash of batch `i` of `lifetime` on `rank`.
fn block_hash(rank: u64, lifetime: u64, i: u64) -> u64 {
    0xC000_0000_0000_0000 | (rank << 48) | (lifetime << 40) | i
}

fn expected(seqs: impl IntoIterator<Item = u64>) -> Vec<(u64, f64)> {
    seqs.into_iter().map(|s| (s, s as f64)).collect()
}

fn gap(
    source: &str,
    dp_rank: Option<u32>,
    expected_seq: u64,
    received_seq: u64,
    recovered: bool,
) -> SeqGap {
    SeqGap {
        source: source.into(),
        dp_rank,
        expected_seq,
        received_seq,
        recovered,
    }
}

fn gaps(c: &Captured) -> Vec<SeqGap> {
    c.trace.gaps().cloned().collect()
}

/// Every record line ends at a flush: a killed capture loses at most the record in flight.
fn assert_flushed_per_record(c: &Captured) {
    let mut end = 0;
    for line in c.text.split_inclusive('\n') {
        end += line.len();
        assert!(
            c.flushes.contains(&end),
            "no flush after the line ending at byte {end}: {line}"
        );
    }
}

fn config(endpoints: Vec<kvscope_capture::EndpointSpec>) -> CaptureConfig {
    CaptureConfig {
        endpoints,
        ..CaptureConfig::default()
    }
}

#[test]
fn plain_capture_records_every_batch_in_order() {
    let peer = Peer::spawn(&["--mode", "plain", "--count", "10"]);
    let c = capture(config(vec![peer.endpoint(Some("engine"))]), 10);

    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    assert_eq!(c.seq_ts("engine", None), expected(0..10));
    assert!(c
        .trace
        .batches()
        .all(|b| b.dp_rank == Some(0) && b.raw.is_none()));
    // One BlockStored per batch, plus a BlockRemoved in batches 3 and 7.
    assert_eq!(c.trace.event_count(), 12);
    assert_eq!(c.stats.events, 12);
    assert_eq!(
        (
            c.stats.batches,
            c.stats.gaps,
            c.stats.resets,
            c.stats.malformed
        ),
        (10, 0, 0, 0)
    );
    assert!(gaps(&c).is_empty());

    let b3 = c.batches("engine", None)[3];
    let [KvEvent::BlockStored(s), KvEvent::BlockRemoved(r)] = &b3.events[..] else {
        panic!("batch 3 events: {:?}", b3.events)
    };
    assert_eq!(s.block_hashes[..], [BlockHash::Int(block_hash(0, 0, 3))]);
    assert_eq!(
        s.parent_block_hash,
        Some(BlockHash::Int(block_hash(0, 0, 2)))
    );
    assert_eq!(s.token_ids, vec![12, 13, 14, 15]);
    assert_eq!(
        (s.block_size, s.medium.as_deref(), s.group_idx),
        (4, Some("CPU"), Some(0))
    );
    assert_eq!(s.kv_cache_spec_kind.as_deref(), Some("full_attention"));
    assert_eq!(r.block_hashes[..], [BlockHash::Int(block_hash(0, 0, 1))]);

    // Header first (no world size unless told), end note last.
    assert!(
        matches!(c.trace.records.first(), Some(TraceRecord::Header(h)) if h.scenario.as_deref() == Some("capture") && !h.meta.contains_key("world_size"))
    );
    let end = c.notes("capture-end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["reason"], "max-batches");
    assert_eq!(end[0]["stats"]["batches"], 10);
    assert_eq!(end[0]["stats"]["events"], 12);
    assert_flushed_per_record(&c);
}

#[test]
fn raw_capture_keeps_the_exact_payload_bytes() {
    let peer = Peer::spawn(&["--mode", "plain", "--count", "5"]);
    let c = capture(
        CaptureConfig {
            raw: true,
            ..config(vec![peer.endpoint(None)])
        },
        5,
    );
    let source = format!("tcp://127.0.0.1:{}", peer.pub_port);
    assert_eq!(c.seq_ts(&source, None), expected(0..5));
    for b in c.trace.batches() {
        let raw = b.raw.as_deref().expect("raw payload kept");
        // msgspec array-of-3 batch header: 0x93, then float64 ts.
        assert_eq!(raw.first(), Some(&0x93));
        assert_eq!(
            msgpack::decode_batch(raw).expect("raw payload decodes"),
            b.to_wire()
        );
        // And kvscope's encoder reproduces msgspec's bytes exactly.
        assert_eq!(msgpack::encode_batch(&b.to_wire(), EventEncoding::Map), raw);
    }
}

#[test]
fn two_endpoints_are_two_sources() {
    let a = Peer::spawn(&["--mode", "plain", "--count", "8"]);
    let b = Peer::spawn(&["--mode", "plain", "--count", "8"]);
    let c = capture(
        config(vec![a.endpoint(Some("pod-a")), b.endpoint(Some("pod-b"))]),
        16,
    );
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    assert_eq!(c.seq_ts("pod-a", Some(Some(0))), expected(0..8));
    assert_eq!(c.seq_ts("pod-b", Some(Some(0))), expected(0..8));
    assert_eq!(c.trace.batches().count(), 16);
    assert!(gaps(&c).is_empty());
}

#[test]
fn gap_is_recovered_over_the_replay_socket() {
    let peer = Peer::spawn(&[
        "--mode",
        "gap",
        "--replay",
        "--count",
        "10",
        "--gap-start",
        "3",
        "--gap-len",
        "3",
    ]);
    let cfg = CaptureConfig {
        replay_endpoints: vec![peer.replay_endpoint(None)],
        ..config(vec![peer.endpoint(Some("e"))])
    };
    let c = capture(cfg, 10);
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    // All batches, in seq order, recovered ones spliced before the live seq 6.
    assert_eq!(c.seq_ts("e", None), expected(0..10));
    assert_eq!(gaps(&c), vec![gap("e", Some(0), 3, 6, true)]);
    assert_eq!(
        (
            c.stats.gaps,
            c.stats.gaps_recovered,
            c.stats.replayed,
            c.stats.missing
        ),
        (1, 1, 3, 0)
    );
    // The gap record sits right before the first recovered batch.
    let pos_gap = c
        .trace
        .records
        .iter()
        .position(|r| matches!(r, TraceRecord::Gap(_)))
        .unwrap();
    assert!(matches!(&c.trace.records[pos_gap + 1], TraceRecord::Batch(b) if b.seq == 3));
    assert!(matches!(
        c.diagnostics.as_slice(),
        [Diagnostic::Gap {
            recovered: 3,
            missing: 0,
            ..
        }]
    ));
    assert_flushed_per_record(&c);
}

#[test]
fn gap_is_recovered_from_a_pre_45177_replay_socket() {
    let peer = Peer::spawn(&[
        "--mode",
        "gap",
        "--replay",
        "--legacy-replay",
        "--count",
        "8",
        "--gap-start",
        "2",
        "--gap-len",
        "4",
    ]);
    let cfg = CaptureConfig {
        replay_endpoints: vec![peer.replay_endpoint(None)],
        ..config(vec![peer.endpoint(Some("e"))])
    };
    let c = capture(cfg, 8);
    assert_eq!(c.seq_ts("e", None), expected(0..8));
    assert_eq!(gaps(&c), vec![gap("e", Some(0), 2, 6, true)]);
}

#[test]
fn partly_overwritten_replay_ring_leaves_the_rest_marked() {
    // seqs 3..7 missing live; 3 and 4 are no longer in the publisher's ring.
    let peer = Peer::spawn(&[
        "--mode",
        "gap",
        "--replay",
        "--count",
        "10",
        "--gap-start",
        "3",
        "--gap-len",
        "4",
        "--gap-unbuffered",
        "2",
    ]);
    let cfg = CaptureConfig {
        replay_endpoints: vec![peer.replay_endpoint(None)],
        ..config(vec![peer.endpoint(Some("e"))])
    };
    let c = capture(cfg, 8);
    assert_eq!(c.seq_ts("e", None), expected([0, 1, 2, 5, 6, 7, 8, 9]));
    assert_eq!(
        gaps(&c),
        vec![
            gap("e", Some(0), 3, 5, false),
            gap("e", Some(0), 5, 7, true)
        ]
    );
    assert_eq!(
        (
            c.stats.gaps,
            c.stats.gaps_recovered,
            c.stats.replayed,
            c.stats.missing
        ),
        (1, 0, 2, 2)
    );
}

#[test]
fn gap_without_replay_is_marked_unrecovered() {
    let peer = Peer::spawn(&[
        "--mode",
        "gap",
        "--count",
        "10",
        "--gap-start",
        "3",
        "--gap-len",
        "3",
    ]);
    let c = capture(config(vec![peer.endpoint(Some("e"))]), 7);
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    assert_eq!(c.seq_ts("e", None), expected([0, 1, 2, 6, 7, 8, 9]));
    assert_eq!(gaps(&c), vec![gap("e", Some(0), 3, 6, false)]);
    assert_eq!(
        (c.stats.gaps, c.stats.gaps_recovered, c.stats.missing),
        (1, 0, 3)
    );
    // The gap record precedes the live batch that revealed it.
    let pos_gap = c
        .trace
        .records
        .iter()
        .position(|r| matches!(r, TraceRecord::Gap(_)))
        .unwrap();
    assert!(matches!(&c.trace.records[pos_gap + 1], TraceRecord::Batch(b) if b.seq == 6));
}

#[test]
fn malformed_messages_are_reported_and_skipped() {
    let peer = Peer::spawn(&["--mode", "malformed", "--count", "10", "--bad-at", "2"]);
    let c = capture(config(vec![peer.endpoint(Some("e"))]), 10);
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    // seq 2 carried the undecodable payload; batch i >= 2 has seq i + 1.
    let got = c.seq_ts("e", None);
    let want: Vec<(u64, f64)> = (0..10u64)
        .map(|i| (if i < 2 { i } else { i + 1 }, i as f64))
        .collect();
    assert_eq!(got, want);
    assert!(
        gaps(&c).is_empty(),
        "a skipped message must not look like a gap: {:?}",
        gaps(&c)
    );
    assert_eq!(c.stats.malformed, 3);

    let frames = c.notes("malformed-message");
    assert_eq!(frames.len(), 2, "{}", c.text);
    assert!(frames[0]["reason"]
        .as_str()
        .unwrap()
        .contains("expected 3 frames, got 2"));
    assert!(frames[1]["reason"]
        .as_str()
        .unwrap()
        .contains("sequence frame is 4 bytes"));
    let undecodable = c.notes("undecodable-payload");
    assert_eq!(undecodable.len(), 1);
    assert_eq!(undecodable[0]["seq"], 2);
    assert_eq!(undecodable[0]["payload_base64"], "k8tB");
    assert_eq!(
        c.diagnostics
            .iter()
            .filter(|d| matches!(d, Diagnostic::Malformed { .. }))
            .count(),
        3
    );
}

#[test]
fn publisher_restart_is_detected_as_a_reset() {
    let peer = Peer::spawn(&["--mode", "restart", "--count", "6", "--restart-at", "4"]);
    let c = capture(config(vec![peer.endpoint(Some("e"))]), 10);
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    let want: Vec<(u64, f64)> = (0..4).chain(0..6).map(|s| (s, s as f64)).collect();
    assert_eq!(c.seq_ts("e", None), want);
    assert_eq!(gaps(&c), vec![gap("e", Some(0), 4, 0, false)]);
    assert_eq!((c.stats.resets, c.stats.gaps), (1, 0));
    // After the restart the hashes are the new lifetime's.
    let b = c.batches("e", None)[4];
    assert_eq!(
        b.events[0].block_hashes(),
        &[BlockHash::Int(block_hash(0, 1, 0))]
    );
    assert!(matches!(
        c.diagnostics.as_slice(),
        [Diagnostic::Reset { .. }]
    ));
}

#[test]
fn data_parallel_ranks_share_a_source_and_replay_per_rank() {
    let peer = Peer::spawn(&[
        "--mode",
        "gap",
        "--replay",
        "--dp-size",
        "2",
        "--count",
        "8",
        "--gap-start",
        "2",
        "--gap-len",
        "2",
    ]);
    let cfg = CaptureConfig {
        data_parallel_size: 2,
        replay_endpoints: vec![peer.replay_endpoint(None)],
        ..config(vec![peer.endpoint(Some("eng"))])
    };
    let c = capture(cfg, 16);
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    assert_eq!(c.seq_ts("eng", Some(Some(0))), expected(0..8));
    assert_eq!(c.seq_ts("eng", Some(Some(1))), expected(0..8));
    let rank1 = c.batches("eng", Some(Some(1)));
    assert_eq!(
        rank1[5].events[0].block_hashes(),
        &[BlockHash::Int(block_hash(1, 0, 5))]
    );
    let mut g = gaps(&c);
    g.sort_by_key(|g| g.dp_rank);
    assert_eq!(
        g,
        vec![
            gap("eng", Some(0), 2, 4, true),
            gap("eng", Some(1), 2, 4, true)
        ]
    );
}

#[test]
fn topic_filters_by_prefix() {
    let peer = Peer::spawn(&[
        "--mode",
        "plain",
        "--count",
        "4",
        "--topic",
        "kv@pod-a@model",
    ]);
    let c = capture(
        CaptureConfig {
            topic: "kv@".into(),
            ..config(vec![peer.endpoint(Some("e"))])
        },
        4,
    );
    assert_eq!(c.seq_ts("e", None), expected(0..4));

    let other = Peer::spawn(&[
        "--mode",
        "plain",
        "--count",
        "4",
        "--topic",
        "kv@pod-a@model",
    ]);
    let c = capture_for(
        CaptureConfig {
            topic: "sglang@".into(),
            ..config(vec![other.endpoint(Some("e"))])
        },
        None,
        Duration::from_millis(1500),
    );
    assert_eq!(c.stats.stop, Some(StopReason::Duration));
    assert_eq!(c.trace.batches().count(), 0);
}

#[test]
fn a_silent_endpoint_is_reported_and_the_duration_still_ends_the_run() {
    // A port nobody listens on (bound, then released); ZMQ keeps reconnecting in the background.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep: kvscope_capture::EndpointSpec = format!("idle=tcp://127.0.0.1:{port}").parse().unwrap();
    let cfg = CaptureConfig {
        silence_warning: Duration::from_millis(300),
        ..config(vec![ep])
    };
    let c = capture_for(cfg, Some(5), Duration::from_millis(1000));
    assert_eq!(c.stats.stop, Some(StopReason::Duration));
    assert_eq!(c.trace.batches().count(), 0);
    let silent: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| matches!(d, Diagnostic::Silent { .. }))
        .collect();
    assert_eq!(silent.len(), 1, "{:?}", c.diagnostics);
    assert!(silent[0]
        .to_string()
        .contains(&format!("tcp://127.0.0.1:{port}: nothing received")));
    assert_eq!(c.notes("capture-end")[0]["reason"], "duration");
}

#[test]
fn unanswered_replay_leaves_the_gap_marked_and_capture_goes_on() {
    let peer = Peer::spawn(&[
        "--mode",
        "gap",
        "--count",
        "10",
        "--gap-start",
        "3",
        "--gap-len",
        "3",
    ]);
    // Nobody serves this replay endpoint: the request times out.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = CaptureConfig {
        replay_endpoints: vec![format!("tcp://127.0.0.1:{port}").parse().unwrap()],
        replay_timeout: Duration::from_millis(300),
        ..config(vec![peer.endpoint(Some("e"))])
    };
    let c = capture(cfg, 7);
    assert_eq!(c.stats.stop, Some(StopReason::MaxBatches));
    assert_eq!(c.seq_ts("e", None), expected([0, 1, 2, 6, 7, 8, 9]));
    assert_eq!(gaps(&c), vec![gap("e", Some(0), 3, 6, false)]);
    let failed = c.notes("replay-failed");
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("no reply within"),
        "{}",
        failed[0]
    );
    assert!(c
        .diagnostics
        .iter()
        .any(|d| matches!(d, Diagnostic::ReplayFailed { .. })));
}
