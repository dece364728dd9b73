//! Checks of a [`Config`] that need domain code.
//!
//! `config.rs` is a leaf (it imports nothing from the crate), so what only
//! the domain can judge is checked here: the scope's host patterns and
//! regexes compile, `[dedup] near_distance` is within what the
//! near-duplicate index can search, the limits that are the domain's
//! constants (extension length, codings trawl decodes, one request's
//! memory, a stored deflate block), a node id and the lease's timing. Every
//! entry point that loads a config
//! runs these before starting anything, so a bad regex is one clear error
//! at start rather than a failure deep inside a running node.

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};
use crate::dedup::NearIndex;
use crate::url::Scope;

/// The year the scope's calendar check is compiled for when only checking:
/// the patterns' validity does not depend on it.
const ANY_YEAR: i32 = 2000;

/// Checks what `Config::load` cannot check without domain code.
pub fn domain(config: &Config) -> Result<(), ConfigError> {
    if config.dedup.near_distance > NearIndex::MAX_DISTANCE {
        return Err(ConfigError::Invalid(format!(
            "dedup.near_distance must be at most {}",
            NearIndex::MAX_DISTANCE
        )));
    }
    Scope::new(&config.scope, &config.traps, ANY_YEAR)
        .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    check_limits(config)?;
    check_cluster(config)?;
    check_upload(config)?;
    check_state(config)
}

/// The settings bounded by the domain's own constants.
fn check_limits(config: &Config) -> Result<(), ConfigError> {
    let invalid = |m: String| Err(ConfigError::Invalid(m));
    let max_ext = crate::url::scope::MAX_EXTENSION_BYTES;
    let long_extension = |e: &String| e.trim_start_matches('.').len() > max_ext;
    if config.scope.deny_extensions.iter().any(long_extension) {
        return invalid(format!(
            "scope.deny_extensions entries must be at most {max_ext} bytes"
        ));
    }
    for coding in config.fetch.accept_encoding.split(',').map(str::trim) {
        // A quality value (`gzip;q=0.5`) is allowed after the coding.
        let name = coding.split(';').next().unwrap_or("").trim();
        let known = crate::fetch::decode::CODINGS;
        if !(coding.is_empty() || known.contains(&name.to_ascii_lowercase().as_str()))
            || !coding.bytes().all(|b| (0x20..0x7f).contains(&b))
        {
            return invalid(format!(
                "fetch.accept_encoding: trawl cannot decode \"{coding}\" (it decodes gzip, br, zstd and deflate)"
            ));
        }
    }
    crate::fetch::proxy::ProxySettings::parse(
        config.fetch.proxy.as_str(),
        &config.fetch.proxy_hosts,
    )
    .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    let one_request = crate::fetch::inflight::REQUEST_COST;
    if config.fetch.max_inflight_bytes < one_request {
        return invalid(format!(
            "fetch.max_inflight_bytes must be at least {one_request} (one request)"
        ));
    }
    if config.warc.store_below > crate::warc::STORE_BELOW_MAX {
        return invalid(
            "warc.store_below must be at most 65535 (one stored deflate block)".to_owned(),
        );
    }
    Ok(())
}

/// `[cluster]`, when enabled: a node id the cluster can carry, and a lease
/// the ownership protocol can keep.
fn check_cluster(config: &Config) -> Result<(), ConfigError> {
    let c = &config.cluster;
    if !c.enabled {
        return Ok(());
    }
    if !crate::cluster::valid_node_id(&c.node_id) {
        return Err(ConfigError::Invalid(format!(
            "cluster.node_id {:?}: 1 to 64 letters, digits, '-' or '_'",
            c.node_id
        )));
    }
    crate::cluster::lease::LeaseSettings::of(config)
        .validate()
        .map_err(|m| ConfigError::Invalid(format!("cluster.lease: {m}")))
}

/// `[cluster] state_url` and `state_options` build a store (no request).
fn check_state(config: &Config) -> Result<(), ConfigError> {
    let c = &config.cluster;
    if !c.enabled || c.state_url.is_empty() {
        return Ok(());
    }
    crate::cluster::chain::StateStore::open(&c.state_url, &c.state_options)
        .map(drop)
        .map_err(|err| ConfigError::Key {
            key: err.key(),
            message: err.to_string(),
        })
}

/// `[upload] url` and `options` build a store (no request is made).
fn check_upload(config: &Config) -> Result<(), ConfigError> {
    let u = &config.upload;
    if !u.enabled {
        return Ok(());
    }
    crate::upload::Target::open(&u.url, &u.options, u.retries)
        .map(drop)
        .map_err(|err| ConfigError::Key {
            key: err.key(),
            message: err.to_string(),
        })
}

/// [`Config::load`] followed by [`domain`]: what the command line uses.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let config = Config::load(path)?;
    domain(&config)?;
    Ok(config)
}

/// [`Config::load_files`] followed by [`domain`].
pub fn load_files(paths: &[PathBuf]) -> Result<Config, ConfigError> {
    let config = Config::load_files(paths)?;
    domain(&config)?;
    Ok(config)
}

/// [`Config::from_layers`] followed by [`domain`].
pub fn from_layers(layers: &[(String, String)]) -> Result<Config, ConfigError> {
    let config = Config::from_layers(layers)?;
    domain(&config)?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(text: &str) -> Result<Config, ConfigError> {
        from_layers(&[("test".into(), text.into())])
    }

    #[test]
    fn records_stored_whole_fit_one_stored_block() {
        assert_eq!(Config::defaults().warc.store_below, 1024);
        assert_eq!(
            layer("[warc]\nstore_below = 0\n").unwrap().warc.store_below,
            0
        );
        assert!(layer("[warc]\nstore_below = 65535\n").is_ok());
        let err = layer("[warc]\nstore_below = 65536\n").unwrap_err();
        assert!(err.to_string().contains("warc.store_below"), "{err}");
    }

    #[test]
    fn in_flight_memory_and_codings_are_what_the_fetcher_can_do() {
        let err = layer("[fetch]\nmax_inflight_bytes = 1000\n").unwrap_err();
        assert!(
            err.to_string().contains("fetch.max_inflight_bytes"),
            "{err}"
        );
        let codings = layer("[fetch]\naccept_encoding = \"gzip;q=1.0, br\"\n").unwrap();
        assert_eq!(codings.fetch.accept_encoding, "gzip;q=1.0, br");
        assert_eq!(Config::defaults().fetch.accept_encoding, "gzip, br, zstd");
        assert!(
            layer("[fetch]\naccept_encoding = \"\"\n").is_ok(),
            "none asked"
        );
        let err = layer("[fetch]\naccept_encoding = \"gzip, compress\"\n").unwrap_err();
        assert!(err.to_string().contains("\"compress\""), "{err}");
    }

    #[test]
    fn a_denied_extension_longer_than_the_scope_compares_is_refused() {
        let long = "x".repeat(crate::url::scope::MAX_EXTENSION_BYTES + 1);
        let err = layer(&format!("[scope]\ndeny_extensions = [\".{long}\"]\n")).unwrap_err();
        assert!(err.to_string().contains("scope.deny_extensions"), "{err}");
        let fits = &long[1..];
        assert!(layer(&format!("[scope]\ndeny_extensions = [\".{fits}\"]\n")).is_ok());
    }

    #[test]
    fn a_cluster_node_id_is_one_the_cluster_can_carry_and_its_lease_one_it_can_keep() {
        let node = |extra: &str| {
            let base = "[cluster]\nenabled = true\nnode_id = \"n1\"\ninsecure = true\n\
                        gossip = \"127.0.0.1:7946\"\nbridge = \"127.0.0.1:7947\"\n";
            from_layers(&[
                ("node".into(), base.into()),
                ("change".into(), format!("[cluster]\n{extra}\n")),
            ])
        };
        assert!(node("").is_ok());
        for bad in ["node_id = \"\"", "node_id = \"n 1\""] {
            let err = node(bad).unwrap_err();
            assert!(err.to_string().contains("cluster.node_id"), "{bad}: {err}");
        }
        let err = node("lease = \"1s\"\ncheckpoint_interval = \"5s\"").unwrap_err();
        assert!(err.to_string().contains("cluster.lease"), "{err}");
    }

    #[test]
    fn the_defaults_pass() {
        domain(&Config::defaults()).unwrap();
    }

    #[test]
    fn a_bad_scope_regex_is_named() {
        let text = "[scope]\ndeny_patterns = [\"(unclosed\"]\n";
        // The config alone parses: only the domain knows regexes.
        Config::from_layers(&[("test".into(), text.into())]).unwrap();
        let err = layer(text).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid(_)), "{err:?}");
        assert!(err.to_string().contains("scope.deny_patterns"), "{err}");
    }

    #[test]
    fn upload_url_and_options_are_checked_when_enabled() {
        layer("[upload]\nurl = \"ftp://nowhere\"\n").unwrap();
        let err = layer("[upload]\nenabled = true\nurl = \"ftp://nowhere\"\n").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.url"),
            "{err:?}"
        );
        let err = layer("[upload]\nenabled = true\n").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.url"),
            "{err:?}"
        );
        let typo = "[upload]\nenabled = true\nurl = \"s3://b/p\"\n\
                    options = { aws_endpiont = \"http://127.0.0.1:9\" }\n";
        let err = layer(typo).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.options.aws_endpiont"),
            "{err:?}"
        );
        let good = "[upload]\nenabled = true\nurl = \"s3://b/p\"\n\
                    options = { aws_endpoint = \"http://127.0.0.1:9\", aws_region = \"x\" }\n";
        layer(good).unwrap();
        let err = layer("[upload]\nconcurrency = 0\n").unwrap_err();
        assert!(err.to_string().contains("upload.concurrency"), "{err}");
        let err = layer("[upload]\nverify = \"md5\"\n").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.verify"),
            "{err:?}"
        );
    }

    #[test]
    fn near_distance_past_the_index_limit_is_refused() {
        let err = layer("[dedup]\nnear_distance = 4\n").unwrap_err();
        assert!(err.to_string().contains("dedup.near_distance"), "{err}");
        layer("[dedup]\nnear_distance = 3\n").unwrap();
    }
}
