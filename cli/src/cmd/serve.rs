//! `kvscope serve`: serve the built web debugger (`dist/`, see `scripts/build-web.sh`) on
//! 127.0.0.1, optionally with a trace preloaded (served at `/trace`, opened via `/?url=/trace`).

use std::path::{Component, Path, PathBuf};

use kvscope_core::wire;

use crate::exit::BadInput;

/// Default port.
pub const DEFAULT_PORT: u16 = 8737;

/// Arguments of `kvscope serve`.
#[derive(clap::Args, Debug)]
#[command(about = "Serve the web debugger on 127.0.0.1, optionally with a trace preloaded")]
pub struct Args {
    /// Trace to preload (JSON Lines or msgpack stream); without it the page opens the demo.
    pub trace: Option<PathBuf>,
    /// Port to listen on (0 picks a free one; the URL is printed either way).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Directory holding the built app (`index.html`, `kvscope_web.js`, `kvscope_web_bg.wasm`).
    #[arg(long, default_value = "dist")]
    pub dist: PathBuf,
}

/// Content type by file extension (`.wasm` must be `application/wasm` for streaming compile).
pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "jsonl" => "application/x-ndjson",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Map a request path to a file under `dist`, refusing anything that leaves it.
pub fn resolve(dist: &Path, url_path: &str) -> Option<PathBuf> {
    let rel = url_path
        .split(['?', '#'])
        .next()
        .unwrap_or("/")
        .trim_start_matches('/');
    let rel = if rel.is_empty() { "index.html" } else { rel };
    let rel = Path::new(rel);
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(dist.join(rel))
}

/// Run the server until killed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let index = args.dist.join("index.html");
    if !index.is_file() {
        return Err(BadInput(format!(
            "{} not found: build the app first (scripts/build-web.sh) or pass --dist DIR",
            index.display()
        ))
        .into());
    }
    let trace = match &args.trace {
        Some(p) => {
            let bytes = crate::input::read(p)?;
            wire::read_trace(&bytes, &crate::input::source_name(p))
                .map_err(|e| BadInput(format!("{}: {e}", p.display())))?;
            Some(bytes)
        }
        None => None,
    };
    let server = tiny_http::Server::http(("127.0.0.1", args.port))
        .map_err(|e| anyhow::anyhow!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    let port = server
        .server_addr()
        .to_ip()
        .map(|a| a.port())
        .unwrap_or(args.port);
    let url = match trace {
        Some(_) => format!("http://127.0.0.1:{port}/?url=/trace"),
        None => format!("http://127.0.0.1:{port}/"),
    };
    crate::out::stdout(format!("kvscope debugger: {url}\n").as_bytes())?;
    eprintln!("serving {} (Ctrl-C to stop)", args.dist.display());
    for req in server.incoming_requests() {
        let method = req.method().clone();
        if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
            let _ = req.respond(
                tiny_http::Response::from_string("method not allowed").with_status_code(405),
            );
            continue;
        }
        let path = req.url().split('?').next().unwrap_or("/").to_owned();
        let header = |v: &str| tiny_http::Header::from_bytes("Content-Type", v).ok();
        let resp = if path == "/trace" {
            match &trace {
                Some(bytes) => {
                    let mut r = tiny_http::Response::from_data(bytes.clone());
                    if let Some(h) = header("application/octet-stream") {
                        r.add_header(h);
                    }
                    r
                }
                None => {
                    tiny_http::Response::from_string("no trace preloaded").with_status_code(404)
                }
            }
        } else {
            match resolve(&args.dist, &path)
                .filter(|p| p.is_file())
                .and_then(|p| std::fs::read(&p).ok().map(|b| (p, b)))
            {
                Some((p, body)) => {
                    let mut r = tiny_http::Response::from_data(body);
                    if let Some(h) = header(content_type(&p)) {
                        r.add_header(h);
                    }
                    r
                }
                None => tiny_http::Response::from_string("not found").with_status_code(404),
            }
        };
        let _ = req.respond(resp);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_dist() {
        let d = Path::new("/srv/dist");
        assert_eq!(resolve(d, "/"), Some(d.join("index.html")));
        assert_eq!(
            resolve(d, "/kvscope_web_bg.wasm?x=1"),
            Some(d.join("kvscope_web_bg.wasm"))
        );
        assert_eq!(resolve(d, "/../etc/passwd"), None);
        assert_eq!(resolve(d, "/a/../../b"), None);
        assert_eq!(content_type(Path::new("x.wasm")), "application/wasm");
        assert_eq!(
            content_type(Path::new("index.html")),
            "text/html; charset=utf-8"
        );
    }
}
