//! The capture plan: what to capture ([`CaptureConfig`]) expanded into one [`Publisher`] per
//! (endpoint, DP rank), each with its replay endpoint.
//!
//! vLLM binds one `ZmqEventPublisher` per data-parallel rank at `PORT + rank`
//! (`offset_endpoint_port`, `vllm/distributed/kv_events.py`; see `docs/capture.md`), so an
//! endpoint with `--data-parallel-size N` is N publishers sharing one source name.

use std::time::Duration;

use crate::endpoint::EndpointSpec;
use crate::seq::SeqTracker;
use crate::session::CaptureError;

/// What to capture and when to stop.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// The publishers' endpoints (one source each).
    pub endpoints: Vec<EndpointSpec>,
    /// Replay endpoints: `NAME=URL` applies to the endpoint of that source name, a plain URL to
    /// the endpoint at the same position.
    pub replay_endpoints: Vec<EndpointSpec>,
    /// ZMQ subscription prefix (vLLM's `KVEventsConfig.topic`, default empty = everything).
    pub topic: String,
    /// Data-parallel ranks per endpoint (ports `PORT..PORT+N-1`), at least 1.
    pub data_parallel_size: u32,
    /// The engines' worker count (vLLM's `parallel_config.world_size`, at least 1), recorded
    /// in the trace header as `meta.world_size` for the job inference of `check`; `None` =
    /// not known, nothing recorded.
    pub world_size: Option<u32>,
    /// Keep the exact payload bytes (base64 `raw` key next to the decoded batch).
    pub raw: bool,
    /// Stop once this many batches were written. Checked between messages: a live message
    /// whose gap is being recovered writes its replayed batches and itself first, so the count
    /// can exceed the limit by one recovery (never leaving a recovered gap half-written).
    pub max_batches: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// How long a replay request waits for each reply.
    pub replay_timeout: Duration,
    /// How often [`Observer::progress`] is called.
    pub progress_interval: Duration,
    /// After this long, report each publisher nothing was received from (once).
    pub silence_warning: Duration,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            replay_endpoints: Vec::new(),
            topic: String::new(),
            data_parallel_size: 1,
            world_size: None,
            raw: false,
            max_batches: None,
            duration: None,
            replay_timeout: Duration::from_secs(5),
            progress_interval: Duration::from_millis(250),
            silence_warning: Duration::from_secs(5),
        }
    }
}

/// One subscribed publisher (an endpoint's DP rank).
#[derive(Debug)]
pub(crate) struct Publisher {
    pub(crate) source: String,
    pub(crate) url: String,
    pub(crate) port_rank: Option<u32>,
    pub(crate) replay_url: Option<String>,
    pub(crate) tracker: SeqTracker,
    pub(crate) last_rank: Option<u32>,
    pub(crate) heard: bool,
}

impl Publisher {
    pub(crate) fn rank_hint(&self, batch_rank: Option<u32>) -> Option<u32> {
        batch_rank.or(self.last_rank).or(self.port_rank)
    }
}

/// Expand the endpoints into publishers (one per DP rank) and attach replay endpoints.
pub(crate) fn plan(config: &CaptureConfig) -> Result<Vec<Publisher>, CaptureError> {
    if config.endpoints.is_empty() {
        return Err(CaptureError::Config("no --endpoint given".into()));
    }
    if config.data_parallel_size == 0 {
        return Err(CaptureError::Config(
            "--data-parallel-size must be at least 1".into(),
        ));
    }
    if config.world_size == Some(0) {
        return Err(CaptureError::Config("--workers must be at least 1".into()));
    }
    let mut replay: Vec<Option<&EndpointSpec>> = vec![None; config.endpoints.len()];
    for (i, r) in config.replay_endpoints.iter().enumerate() {
        let target = match &r.name {
            Some(name) => config.endpoints.iter().position(|e| e.source() == name).ok_or_else(|| {
                CaptureError::Config(format!("--replay-endpoint {r}: no --endpoint has the source name {name:?}"))
            })?,
            None if i < config.endpoints.len() => i,
            None => {
                return Err(CaptureError::Config(format!(
                    "--replay-endpoint {r}: more unnamed replay endpoints than endpoints; name it NAME=URL"
                )))
            }
        };
        if let Some(prev) = replay[target].replace(r) {
            return Err(CaptureError::Config(format!(
                "--replay-endpoint {r} and {prev} both apply to {}",
                config.endpoints[target].source()
            )));
        }
    }
    let mut pubs = Vec::new();
    for (i, ep) in config.endpoints.iter().enumerate() {
        if config.endpoints[..i]
            .iter()
            .any(|o| o.source() == ep.source())
        {
            return Err(CaptureError::Config(format!(
                "two --endpoint values have the source name {:?}; give each a distinct NAME=",
                ep.source()
            )));
        }
        for rank in 0..config.data_parallel_size {
            pubs.push(Publisher {
                source: ep.source().to_string(),
                url: ep.url_for_rank(rank)?,
                port_rank: (config.data_parallel_size > 1).then_some(rank),
                replay_url: replay[i].map(|r| r.url_for_rank(rank)).transpose()?,
                tracker: SeqTracker::new(),
                last_rank: None,
                heard: false,
            });
        }
    }
    Ok(pubs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> EndpointSpec {
        s.parse().unwrap()
    }

    #[test]
    fn plan_expands_dp_ranks_and_replay() {
        let cfg = CaptureConfig {
            endpoints: vec![ep("a=tcp://h:5557"), ep("tcp://g:6000")],
            replay_endpoints: vec![ep("tcp://h:5600")],
            data_parallel_size: 2,
            ..CaptureConfig::default()
        };
        let p = plan(&cfg).unwrap();
        let got: Vec<_> = p
            .iter()
            .map(|p| {
                (
                    p.source.as_str(),
                    p.url.as_str(),
                    p.port_rank,
                    p.replay_url.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", "tcp://h:5557", Some(0), Some("tcp://h:5600")),
                ("a", "tcp://h:5558", Some(1), Some("tcp://h:5601")),
                ("tcp://g:6000", "tcp://g:6000", Some(0), None),
                ("tcp://g:6000", "tcp://g:6001", Some(1), None),
            ]
        );
    }

    #[test]
    fn plan_matches_named_replay_and_rejects_conflicts() {
        let cfg = CaptureConfig {
            endpoints: vec![ep("a=tcp://h:1"), ep("b=tcp://h:2")],
            replay_endpoints: vec![ep("b=tcp://h:12")],
            ..CaptureConfig::default()
        };
        let p = plan(&cfg).unwrap();
        assert_eq!(p[0].replay_url, None);
        assert_eq!(p[1].replay_url.as_deref(), Some("tcp://h:12"));
        assert_eq!(p[1].port_rank, None);

        let bad = |endpoints: Vec<EndpointSpec>, replay: Vec<EndpointSpec>, dp: u32| {
            plan(&CaptureConfig {
                endpoints,
                replay_endpoints: replay,
                data_parallel_size: dp,
                ..CaptureConfig::default()
            })
            .unwrap_err()
            .to_string()
        };
        assert!(bad(vec![], vec![], 1).contains("no --endpoint"));
        assert!(bad(vec![ep("tcp://h:1")], vec![], 0).contains("at least 1"));
        let no_workers = plan(&CaptureConfig {
            endpoints: vec![ep("tcp://h:1")],
            world_size: Some(0),
            ..CaptureConfig::default()
        });
        assert!(no_workers.unwrap_err().to_string().contains("--workers"));
        assert!(bad(vec![ep("a=tcp://h:1")], vec![ep("c=tcp://h:2")], 1).contains("\"c\""));
        assert!(bad(
            vec![ep("a=tcp://h:1")],
            vec![ep("tcp://h:2"), ep("tcp://h:3")],
            1
        )
        .contains("more unnamed"));
        assert!(bad(
            vec![ep("a=tcp://h:1")],
            vec![ep("tcp://h:2"), ep("a=tcp://h:3")],
            1
        )
        .contains("both apply"));
        assert!(bad(vec![ep("a=tcp://h:1"), ep("a=tcp://h:2")], vec![], 1).contains("distinct"));
        assert!(bad(vec![ep("ipc:///tmp/x")], vec![], 2).contains("tcp://"));
    }
}
