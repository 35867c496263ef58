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

use std::borrow::Cow;

use tokio_postgres::Config;

/// The store at `url`, read as libpq reads it (see the module).
pub(crate) fn parse(url: &str) -> Result<Config, tokio_postgres::Error> {
    libpq_hosts(url).parse()
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
fn percent_decoded(text: &str) -> String {
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
    fn credentials_database_and_options_survive_the_rewrite() {
        let config = parse("postgresql://al%40ice:s3cret@localhost:5433/team?host=/run/pg&options=-c%20search_path%3Dx").unwrap();
        assert_eq!(config.get_user(), Some("al@ice"));
        assert_eq!(config.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(config.get_dbname(), Some("team"));
        assert_eq!(config.get_options(), Some("-c search_path=x"));
        assert_eq!(config.get_ports(), [5433]);
    }
}
