//! How a store URL (`postgresql://…`) is read: by `tokio-postgres`, with libpq's rule for
//! the hosts, which it does not follow.
//!
//! libpq keeps one value per parameter, so `host=` (or `port=`) in the query replaces the
//! host (or port) before it: `postgresql://roo@localhost/roo?host=/run/pg` is the socket
//! in `/run/pg` only (scripts/pg-cluster prints such URLs). `tokio-postgres` appends
//! instead and tries TCP `localhost:5432` first — where any local process may listen, ask
//! for the password in clear text and get it, or serve another database. So the URL is
//! rewritten before it is parsed: the query's `host`/`port`, the last of each, replace
//! the authority's.
//!
//! The TLS parameters libpq reads and `tokio-postgres` does not (`sslmode` beyond
//! `disable`/`prefer`/`require`, `sslrootcert`, `sslcert`, `sslkey`) are taken out of the
//! query before it is parsed and read by [`tls_params`] instead (see `crate::pg_tls`).

use std::borrow::Cow;

use tokio_postgres::Config;

/// The store at `url`, read as libpq reads it (see the module).
pub(crate) fn parse(url: &str) -> Result<Config, tokio_postgres::Error> {
    without_tls_params(&libpq_hosts(url)).parse()
}

/// The query parameters that choose TLS (see `crate::pg_tls`).
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// The TLS parameters of `url`'s query: for each of [`TLS_KEYS`] present, its last value,
/// percent-decoded (as libpq keeps one value per parameter).
pub(crate) fn tls_params(url: &str) -> Vec<(&'static str, String)> {
    let Some((_, query)) = split_query(url) else {
        return Vec::new();
    };
    TLS_KEYS
        .iter()
        .filter_map(|key| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
                .rfind(|(k, _)| percent_decoded(k) == *key)
                .map(|(_, value)| (*key, percent_decoded(value)))
        })
        .collect()
}

/// `url` up to its query and the query, split as `tokio-postgres` does (the query starts
/// at the first `?` after the credentials); `None` without a query.
fn split_query(url: &str) -> Option<(&str, &str)> {
    let after_at = url.find('@').map_or(0, |at| at + 1);
    let mark = after_at + url[after_at..].find('?')?;
    Some((&url[..mark], &url[mark + 1..]))
}

/// `url` without the parameters of [`TLS_KEYS`] in its query.
fn without_tls_params(url: &str) -> Cow<'_, str> {
    let Some((base, query)) = split_query(url) else {
        return Cow::Borrowed(url);
    };
    let is_tls = |pair: &str| {
        let key = pair.split_once('=').map_or(pair, |(key, _)| key);
        TLS_KEYS.contains(&percent_decoded(key).as_str())
    };
    if !query.split('&').any(is_tls) {
        return Cow::Borrowed(url);
    }
    let kept: Vec<&str> = query.split('&').filter(|pair| !is_tls(pair)).collect();
    if kept.is_empty() {
        Cow::Owned(base.to_owned())
    } else {
        Cow::Owned(format!("{base}?{}", kept.join("&")))
    }
}

/// `url` with the query's `host` and `port` (the last of each) in place of the
/// authority's, every host then given as a `host=` of the query (`tokio-postgres` adds
/// a default port for each host of the authority, which a `port=` would not replace);
/// unchanged when its query names neither.
fn libpq_hosts(url: &str) -> Cow<'_, str> {
    let Some((scheme, rest)) = ["postgresql://", "postgres://"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme).map(|rest| (*scheme, rest)))
    else {
        return Cow::Borrowed(url);
    };
    // Split as tokio-postgres does: credentials up to the first `@`, then the hosts up to
    // `/` or `?`, then the database, then the query.
    let (credentials, rest) = match rest.find('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let (hosts, rest) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let Some((path, query)) = rest.split_once('?') else {
        return Cow::Borrowed(url);
    };
    let pairs: Vec<(String, &str, &str)> = query
        .split('&')
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decoded(key), value, pair)
        })
        .collect();
    let last = |key: &str| pairs.iter().rposition(|(k, _, _)| k == key);
    let (query_host, query_port) = (last("host"), last("port"));
    if query_host.is_none() && query_port.is_none() {
        return Cow::Borrowed(url);
    }
    // The authority's hosts (`name`, `%2Fdir`, `v6` without its brackets) and ports.
    let authority: Vec<(&str, &str)> = hosts
        .split(',')
        .filter(|chunk| !chunk.is_empty())
        .map(|chunk| match chunk.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, after)) => (host, after.strip_prefix(':').unwrap_or("")),
                // Left as it is: tokio-postgres refuses it.
                None => (chunk, ""),
            },
            None => chunk.split_once(':').unwrap_or((chunk, "")),
        })
        .collect();
    if authority.iter().any(|(host, _)| host.starts_with('[')) {
        return Cow::Borrowed(url);
    }
    let hosts: Vec<&str> = match query_host {
        Some(i) => vec![pairs[i].1],
        None => authority.iter().map(|(host, _)| *host).collect(),
    };
    let ports = match query_port {
        Some(i) => Some(pairs[i].1.to_string()),
        None => authority.iter().any(|(_, port)| !port.is_empty()).then(|| {
            let ports: Vec<&str> = authority.iter().map(|(_, port)| *port).collect();
            ports.join(",")
        }),
    };
    let mut kept: Vec<String> = pairs
        .iter()
        .filter(|(key, _, _)| key != "host" && key != "port")
        .map(|(_, _, pair)| (*pair).to_string())
        .collect();
    kept.extend(hosts.iter().map(|host| format!("host={host}")));
    kept.extend(ports.map(|ports| format!("port={ports}")));
    let credentials = credentials.map(|c| format!("{c}@")).unwrap_or_default();
    Cow::Owned(format!("{scheme}{credentials}{path}?{}", kept.join("&")))
}

/// `text` with `%XX` escapes decoded (a query key; invalid escapes stay as they are).
pub(crate) fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let (h, l) = (hex(h).unwrap_or(0), hex(l).unwrap_or(0));
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// When every host of `config` is on the machine that reads the URL — a unix socket
/// directory, `localhost`, a loopback or unspecified address (by `hostaddr=` when given)
/// — what they are, for a sentence ("the unix socket in /run/pg"); `None` when one may
/// be another machine. Handed to another host, such a URL names a server *there*: any
/// local user of that host may listen on the port and ask for the password.
pub(crate) fn only_this_machine(config: &Config) -> Option<String> {
    use std::net::IpAddr;
    use tokio_postgres::config::Host;
    let local_ip = |ip: IpAddr| {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        ip.is_loopback() || ip.is_unspecified()
    };
    let addrs = config.get_hostaddrs();
    let mut named = Vec::new();
    for (i, host) in config.get_hosts().iter().enumerate() {
        let local = match (addrs.get(i), host) {
            (Some(ip), _) => local_ip(*ip).then(|| format!("the loopback address {ip}")),
            #[cfg(unix)]
            (None, Host::Unix(dir)) => Some(format!("the unix socket in {}", dir.display())),
            (None, Host::Tcp(name)) => {
                let name = name.trim_start_matches('[').trim_end_matches(']');
                let lower = name.to_ascii_lowercase();
                let loopback = lower == "localhost"
                    || lower.ends_with(".localhost")
                    || name.parse::<IpAddr>().is_ok_and(local_ip);
                loopback.then(|| format!("the loopback host {name}"))
            }
        };
        named.push(local?);
    }
    if named.is_empty() {
        // No host: the default unix socket, as libpq.
        return Some("the default unix socket".into());
    }
    Some(named.join(" and "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;

    use tokio_postgres::config::Host;

    use super::*;

    fn hosts(url: &str) -> (Vec<Host>, Vec<u16>) {
        let config = parse(url).unwrap();
        (config.get_hosts().to_vec(), config.get_ports().to_vec())
    }

    fn unix(dir: &str) -> Host {
        Host::Unix(PathBuf::from(dir))
    }

    fn tcp(host: &str) -> Host {
        Host::Tcp(host.to_string())
    }

    #[test]
    fn the_querys_host_replaces_the_authoritys_as_in_libpq() {
        // scripts/pg-cluster's URL: the socket only, never TCP localhost first.
        assert_eq!(
            hosts("postgresql://roo:pw@localhost/roo?host=/run/pg&options=-c%20x%3Dy"),
            (vec![unix("/run/pg")], vec![])
        );
        // The authority's port stays with the query's host.
        assert_eq!(
            hosts("postgres://roo@localhost:5433/roo?host=%2Frun%2Fpg"),
            (vec![unix("/run/pg")], vec![5433])
        );
        // The last `host=` wins, and a percent-encoded key is still `host`.
        assert_eq!(
            hosts("postgresql://roo@db/roo?host=/a&h%6Fst=/b"),
            (vec![unix("/b")], vec![])
        );
        // `port=` replaces the authority's port.
        assert_eq!(
            hosts("postgresql://roo@db.example:5433/roo?port=6000"),
            (vec![tcp("db.example")], vec![6000])
        );
        assert_eq!(
            hosts("postgresql://roo@[::1]:5433,db:5434/roo?host=/s&port=7000"),
            (vec![unix("/s")], vec![7000])
        );
        assert_eq!(
            hosts("postgresql://roo@[::1]:5433,db/roo?port=7000"),
            (vec![tcp("::1"), tcp("db")], vec![7000])
        );
        // An authority tokio-postgres refuses is refused still.
        assert!(parse("postgresql://roo@[::1:5433/roo?host=/s").is_err());
        // Nothing to replace: as written.
        for url in [
            "postgresql://roo:p%40ss@db.example:5433/roo",
            "postgresql://roo@%2Frun%2Fpg/roo?connect_timeout=3",
            "postgresql:///roo?host=/run/pg",
        ] {
            assert_eq!(libpq_hosts(url), url);
        }
        assert_eq!(
            hosts("postgresql:///roo?host=/run/pg"),
            (vec![unix("/run/pg")], vec![])
        );
    }

    #[test]
    fn tls_parameters_are_read_apart_and_left_out_of_the_parse() {
        let url = "postgresql://roo:p%3Fw@db.example/roo?sslmode=require&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3&sslmode=verify-full";
        assert_eq!(
            tls_params(url),
            vec![
                ("sslmode", "verify-full".to_owned()),
                ("sslrootcert", "/etc/ca.pem".to_owned())
            ]
        );
        let config = parse(url).unwrap();
        assert_eq!(
            config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        assert_eq!(
            without_tls_params("postgresql://roo@db/roo?sslmode=verify-ca"),
            "postgresql://roo@db/roo"
        );
        assert_eq!(
            without_tls_params("postgresql://roo@db/roo?host=/s&sslcert=c&sslkey=k"),
            "postgresql://roo@db/roo?host=/s"
        );
        // With the hosts rewritten too.
        assert_eq!(
            hosts("postgresql://roo@db/roo?sslmode=bogus&host=/run/pg"),
            (vec![unix("/run/pg")], vec![])
        );
        assert!(tls_params("postgresql://roo@db/roo").is_empty());
    }

    #[test]
    fn credentials_database_and_options_survive_the_rewrite() {
        let config = parse("postgresql://al%40ice:s3cret@localhost:5433/team?host=/run/pg&options=-c%20search_path%3Dx").unwrap();
        assert_eq!(config.get_user(), Some("al@ice"));
        assert_eq!(config.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(config.get_dbname(), Some("team"));
        assert_eq!(config.get_options(), Some("-c search_path=x"));
        assert_eq!(config.get_ports(), [5433]);
    }

    #[test]
    fn a_url_naming_only_this_machine_is_told_apart_from_one_naming_a_server() {
        let local = |url: &str| only_this_machine(&parse(url).unwrap());
        for (url, says) in [
            (
                "postgresql://r@localhost/r?host=/tmp/pg",
                "the unix socket in /tmp/pg",
            ),
            ("postgresql://r@localhost/r", "the loopback host localhost"),
            (
                "postgresql://r@LOCALHOST:5433/r",
                "the loopback host LOCALHOST",
            ),
            (
                "postgresql://r@127.0.0.1/r?sslmode=disable",
                "the loopback host 127.0.0.1",
            ),
            (
                "postgresql://r@127.8.9.10/r",
                "the loopback host 127.8.9.10",
            ),
            ("postgresql://r@[::1]:5432/r", "the loopback host ::1"),
            (
                "postgresql://r@[::ffff:127.0.0.1]/r",
                "the loopback host ::ffff:127.0.0.1",
            ),
            ("postgresql://r@0.0.0.0/r", "the loopback host 0.0.0.0"),
            (
                "postgresql://r@db.localhost/r",
                "the loopback host db.localhost",
            ),
            (
                "postgresql://r@db.example/r?hostaddr=127.0.0.1",
                "the loopback address 127.0.0.1",
            ),
            (
                "postgresql://r@localhost,127.0.0.1/r",
                "the loopback host localhost and the loopback host 127.0.0.1",
            ),
        ] {
            assert_eq!(local(url).as_deref(), Some(says), "{url}");
        }
        // One host elsewhere is enough: the URL may reach the server from another host.
        for url in [
            "postgresql://r@db.example/r",
            "postgresql://r@10.0.0.2/r?sslmode=disable",
            "postgresql://r@[fd00::2]/r",
            "postgresql://r@localhost,db.example/r",
            "postgresql://r@localhost/r?hostaddr=10.0.0.2",
            "postgresql://r@mylocalhost/r",
        ] {
            assert_eq!(local(url), None, "{url}");
        }
    }
}
