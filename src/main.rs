//! The `trawl` command line: demo, run, robots, testweb, url, simhash,
//! config, cluster, uploads.
//!
//! The binary is the edge of the system: it parses arguments, builds the
//! config, starts the node and the admin server, and turns errors into exit
//! codes (`anyhow` lives only here).

mod cli;

// mimalloc: the parse tree, URLs and records allocate and free small
// objects at a high rate; it cuts CPU per page by about a fifth against
// glibc's malloc (see docs/benchmarks.md). The `system-allocator` feature
// leaves glibc's malloc in place, for heap profilers that hook it
// (heaptrack: see docs/benchmarks.md).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A polite, durable web crawler.
#[derive(Debug, Parser)]
#[command(name = "trawl", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Crawl the built-in synthetic web end to end and check the result.
    Demo(cli::demo::DemoArgs),
    /// Crawl from seed URLs with the full pipeline.
    Run(cli::run::RunArgs),
    /// Decide URLs against a robots.txt file, naming the deciding line.
    Robots(cli::robots::RobotsArgs),
    /// The crawl report (hosts, MIME types, status codes, seeds) of
    /// events files: every run of a crawl, every node of a cluster.
    Report(cli::report::ReportArgs),
    /// Control a running node through its admin API.
    Ctl(cli::ctl::CtlArgs),
    /// Serve the synthetic web on loopback.
    Testweb(cli::testweb::TestwebArgs),
    /// Print the simhash (near-duplicate fingerprint) of HTML files.
    Simhash(cli::simhash::SimhashArgs),
    /// URL tools.
    Url {
        #[command(subcommand)]
        command: UrlCommand,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Cluster tools.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Object storage tools.
    Uploads {
        #[command(subcommand)]
        command: UploadsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum UploadsCommand {
    /// Join the WARC file segments a node lost with its disk left.
    Join(cli::uploads::JoinArgs),
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Make a cluster CA, node certificates and the gossip key.
    Certs(cli::cluster::CertsArgs),
}

#[derive(Debug, Subcommand)]
enum UrlCommand {
    /// Print the normal form (the identity) of each URL.
    Normalize(cli::url::NormalizeArgs),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (defaults + --config file).
    Print {
        /// A TOML file layered on the defaults (repeatable, as for `run`).
        #[arg(long)]
        config: Vec<PathBuf>,
    },
}

fn main() -> std::process::ExitCode {
    trawl::store::tune_native_heap();
    let args = Args::parse();
    // `run` logs in the format its config asks for, once it has read it.
    if !matches!(args.command, Command::Run(_)) {
        cli::init_logging(
            trawl::config::LogFormat::Text,
            trawl::config::LogColor::Auto,
        );
    }
    let result = match args.command {
        Command::Demo(a) => cli::demo::main(a),
        Command::Run(a) => cli::run::main(a),
        Command::Ctl(a) => cli::ctl::main(a),
        Command::Robots(a) => cli::robots::main(a),
        Command::Report(a) => cli::report::main(a),
        Command::Testweb(a) => cli::testweb::main(a),
        Command::Url {
            command: UrlCommand::Normalize(a),
        } => cli::url::main(a),
        Command::Simhash(a) => cli::simhash::main(a),
        Command::Cluster {
            command: ClusterCommand::Certs(a),
        } => cli::cluster::main(a),
        Command::Uploads {
            command: UploadsCommand::Join(a),
        } => cli::uploads::main(a),
        Command::Config {
            command: ConfigCommand::Print { config },
        } => trawl::validate::load_files(&config)
            .map(|c| {
                print!("{}", c.to_toml());
                std::process::ExitCode::SUCCESS
            })
            .map_err(Into::into),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
