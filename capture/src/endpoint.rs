//! Endpoint specs (`[NAME=]tcp://HOST:PORT`) and vLLM's per-DP-rank port offset.

use std::fmt;
use std::str::FromStr;

/// A bad `--endpoint` / `--replay-endpoint` value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("endpoint {spec:?}: {message}")]
pub struct EndpointError {
    /// The value as given.
    pub spec: String,
    /// What is wrong with it.
    pub message: String,
}

/// One `--endpoint` (or `--replay-endpoint`): an optional source name and a ZMQ URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSpec {
    /// The name given as `NAME=...`, if any.
    pub name: Option<String>,
    /// The ZMQ endpoint the subscriber connects to, e.g. `tcp://10.0.0.5:5557`.
    pub url: String,
}

impl EndpointSpec {
    /// The trace `source` this endpoint's batches get: the name, else the URL as given.
    pub fn source(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.url)
    }

    /// The URL of DP rank `rank`'s publisher (see [`offset_endpoint_port`]).
    pub fn url_for_rank(&self, rank: u32) -> Result<String, EndpointError> {
        offset_endpoint_port(&self.url, rank)
    }
}

impl fmt::Display for EndpointSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "{n}={}", self.url),
            None => f.write_str(&self.url),
        }
    }
}

impl FromStr for EndpointSpec {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |message: &str| EndpointError {
            spec: s.to_string(),
            message: message.to_string(),
        };
        // `NAME=URL` when an `=` comes before the scheme separator; URLs themselves have none.
        let (name, url) = match (s.find('='), s.find("://")) {
            (Some(eq), Some(scheme)) if eq < scheme => (Some(&s[..eq]), &s[eq + 1..]),
            (Some(eq), None) => (Some(&s[..eq]), &s[eq + 1..]),
            _ => (None, s),
        };
        if let Some(n) = name {
            if n.trim().is_empty() {
                return Err(err("the name before '=' is empty"));
            }
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(err(
                "expected a ZMQ URL such as tcp://HOST:PORT or ipc:///path",
            ));
        };
        match scheme {
            "tcp" => {
                let Some((host, port)) = rest.rsplit_once(':') else {
                    return Err(err("a tcp endpoint needs a port: tcp://HOST:PORT"));
                };
                if host.is_empty() {
                    return Err(err("a tcp endpoint needs a host: tcp://HOST:PORT"));
                }
                if host == "*" {
                    return Err(err(
                        "'*' is a bind address (vLLM's default tcp://*:5557); connect to the engine's host, e.g. tcp://127.0.0.1:5557",
                    ));
                }
                port.parse::<u16>()
                    .map_err(|_| err("the port is not a number in 0..=65535"))?;
            }
            "ipc" => {
                if rest.is_empty() {
                    return Err(err("an ipc endpoint needs a path: ipc:///path"));
                }
            }
            _ => {
                return Err(err(
                    "only tcp:// and ipc:// endpoints can be captured from another process",
                ))
            }
        }
        Ok(EndpointSpec {
            name: name.map(str::to_string),
            url: url.to_string(),
        })
    }
}

/// The endpoint of DP rank `rank`: vLLM binds one publisher per data-parallel rank at TCP port
/// `PORT + rank` (`offset_endpoint_port`, used by `ZmqEventPublisher` for both the live and
/// the replay endpoint). Rank 0 is the endpoint itself; other ranks need a `tcp://` endpoint.
pub fn offset_endpoint_port(url: &str, rank: u32) -> Result<String, EndpointError> {
    if rank == 0 {
        return Ok(url.to_string());
    }
    let err = |message: String| EndpointError {
        spec: url.to_string(),
        message,
    };
    let rest = url.strip_prefix("tcp://").ok_or_else(|| {
        err(
            "--data-parallel-size needs tcp:// endpoints (vLLM offsets the TCP port per rank)"
                .into(),
        )
    })?;
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| err("a tcp endpoint needs a port".into()))?;
    let port: u16 = port
        .parse()
        .map_err(|_| err("the port is not a number in 0..=65535".into()))?;
    let shifted = u16::try_from(u32::from(port) + rank)
        .map_err(|_| err(format!("port {port} + DP rank {rank} is above 65535")))?;
    Ok(format!("tcp://{host}:{shifted}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_named() {
        let e: EndpointSpec = "tcp://127.0.0.1:5557".parse().unwrap();
        assert_eq!(e.name, None);
        assert_eq!(e.source(), "tcp://127.0.0.1:5557");
        let e: EndpointSpec = "pod-a=tcp://10.0.0.5:5557".parse().unwrap();
        assert_eq!(e.name.as_deref(), Some("pod-a"));
        assert_eq!(e.url, "tcp://10.0.0.5:5557");
        assert_eq!(e.source(), "pod-a");
        assert_eq!(e.to_string(), "pod-a=tcp://10.0.0.5:5557");
        let e: EndpointSpec = "ipc:///tmp/kv.sock".parse().unwrap();
        assert_eq!(e.url, "ipc:///tmp/kv.sock");
        let e: EndpointSpec = "tcp://[::1]:5557".parse().unwrap();
        assert_eq!(e.url, "tcp://[::1]:5557");
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for bad in [
            "",
            "=tcp://h:1",
            "tcp://h",
            "tcp://:1",
            "tcp://h:99999",
            "tcp://*:5557",
            "udp://h:1",
            "h:1",
            "ipc://",
        ] {
            let e = bad.parse::<EndpointSpec>().unwrap_err();
            assert_eq!(e.spec, bad);
            assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn offsets_the_port_per_rank_like_vllm() {
        assert_eq!(
            offset_endpoint_port("tcp://h:5557", 0).unwrap(),
            "tcp://h:5557"
        );
        assert_eq!(
            offset_endpoint_port("tcp://h:5557", 3).unwrap(),
            "tcp://h:5560"
        );
        assert_eq!(
            offset_endpoint_port("tcp://[::1]:5557", 1).unwrap(),
            "tcp://[::1]:5558"
        );
        assert!(offset_endpoint_port("tcp://h:65535", 1).is_err());
        assert!(offset_endpoint_port("ipc:///tmp/x", 1).is_err());
        assert_eq!(
            offset_endpoint_port("ipc:///tmp/x", 0).unwrap(),
            "ipc:///tmp/x"
        );
    }
}
