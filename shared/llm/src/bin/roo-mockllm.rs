//! `roo-mockllm`: the mock LLM server as a process, for end-to-end tests, demos and the
//! benchmarks. Prints its base URL as the first line of stdout, then serves until
//! killed; with `--record FILE` it appends each request's JSON body to FILE as one line
//! (how `scripts/bench-first-request` sees exactly what a client sent); with
//! `--llama-ctx N` it answers `GET /props` as a llama-server with N tokens per slot.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use roo_llm::mock_server::{MockServer, Protocol, RawReply, llama_props};
use roo_llm::script::{Cursors, Script, ScriptPlayer};

const HELP: &str = "\
roo-mockllm: a local mock LLM server speaking the Anthropic Messages and OpenAI Chat
Completions streaming wire formats, answering from a script file.

Usage: roo-mockllm [--protocol anthropic|openai] [--script FILE] [--port N] [--host IP]
                   [--record FILE] [--llama-ctx N [--llama-slots N]]

Options:
  --protocol P   which base URL to print (both protocols are always served):
                 anthropic -> http://IP:PORT, openai -> http://IP:PORT/v1 [default: openai]
  --script FILE  script of assistant turns (same format as --provider script; see docs/LLM.md)
  --port N       port to listen on; 0 picks a free one [default: 0]
  --host IP      address to listen on [default: 127.0.0.1]
  --record FILE  append each request's JSON body to FILE, one line per request
                 (but the context probes: /props, /api/ps, /api/show)
  --llama-ctx N  answer GET /props as llama-server does, with N tokens of context per slot
  --llama-slots N
                 the slots (--parallel) /props reports with --llama-ctx [default: 1]
  -h, --help     show this help

Examples:
  url=$(roo-mockllm --protocol anthropic --script demo.yaml | head -n1)
  roo-mockllm --protocol openai --script team.yaml --port 8089
  roo-mockllm --protocol anthropic --script demo.yaml --record requests.jsonl
";

struct Args {
    protocol: Protocol,
    script: Option<PathBuf>,
    port: u16,
    host: IpAddr,
    record: Option<PathBuf>,
    llama_ctx: Option<u64>,
    llama_slots: u64,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        protocol: Protocol::OpenAi,
        script: None,
        port: 0,
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        record: None,
        llama_ctx: None,
        llama_slots: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("parse arguments: {name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--protocol" => {
                args.protocol = match value("--protocol")?.as_str() {
                    "anthropic" => Protocol::Anthropic,
                    "openai" => Protocol::OpenAi,
                    other => {
                        return Err(format!(
                            "parse arguments: unknown protocol `{other}`; use anthropic or openai"
                        ));
                    }
                }
            }
            "--script" => args.script = Some(PathBuf::from(value("--script")?)),
            "--record" => args.record = Some(PathBuf::from(value("--record")?)),
            "--port" => {
                let v = value("--port")?;
                args.port = v
                    .parse()
                    .map_err(|_| format!("parse arguments: --port `{v}` is not a port number"))?;
            }
            "--llama-ctx" => {
                let v = value("--llama-ctx")?;
                args.llama_ctx = Some(v.parse().map_err(|_| {
                    format!("parse arguments: --llama-ctx `{v}` is not a number of tokens")
                })?);
            }
            "--llama-slots" => {
                let v = value("--llama-slots")?;
                args.llama_slots = v.parse().map_err(|_| {
                    format!("parse arguments: --llama-slots `{v}` is not a number of slots")
                })?;
            }
            "--host" => {
                let v = value("--host")?;
                args.host = v
                    .parse()
                    .map_err(|_| format!("parse arguments: --host `{v}` is not an IP address"))?;
            }
            other => {
                return Err(format!(
                    "parse arguments: unexpected `{other}`; see roo-mockllm --help"
                ));
            }
        }
    }
    Ok(Some(args))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("roo-mockllm: failed to {message}");
            return ExitCode::from(2);
        }
    };
    let player = match &args.script {
        Some(path) => match Script::load(path) {
            Ok(script) => Some(ScriptPlayer::new(
                script,
                path.display().to_string(),
                Cursors::in_memory(),
            )),
            Err(e) => {
                eprintln!("roo-mockllm: failed to {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("roo-mockllm: failed to start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let addr = SocketAddr::new(args.host, args.port);
        let server = match MockServer::bind(addr, player).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("roo-mockllm: failed to listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(n_ctx) = args.llama_ctx {
            server.serve_props(RawReply::json(200, &llama_props(n_ctx, args.llama_slots)));
        }
        println!("{}", server.base_url(args.protocol));
        // Serve until killed; a closed stdout (reader gone) must not stop the server.
        match &args.record {
            Some(path) => match record(&server, path).await {
                Ok(never) => match never {},
                Err(e) => {
                    eprintln!(
                        "roo-mockllm: failed to record requests in {}: {e}",
                        path.display()
                    );
                    ExitCode::FAILURE
                }
            },
            None => std::future::pending::<ExitCode>().await,
        }
    })
}

/// Appends the body of every request `server` receives to `path`, one JSON line each,
/// flushed as it arrives so a reader sees a request as soon as it was made.
async fn record(server: &MockServer, path: &Path) -> std::io::Result<std::convert::Infallible> {
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await?;
    let mut written = 0;
    loop {
        // A long wait re-armed forever: the server serves until killed.
        server
            .wait_until(Duration::from_secs(3600), |s| s.requests().len() > written)
            .await;
        for request in server.requests_since(written) {
            let mut line = serde_json::to_vec(&request.body).map_err(std::io::Error::other)?;
            line.push(b'\n');
            file.write_all(&line).await?;
            written += 1;
        }
        file.flush().await?;
    }
}
