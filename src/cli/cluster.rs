//! `trawl cluster certs`: the credentials of an authenticated cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use trawl::cluster::tls::CertsDir;

/// Arguments of `trawl cluster certs`.
#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Where to write the files (made if missing). A CA already there is
    /// reused, so running again with new node ids adds nodes.
    #[arg(long)]
    out: PathBuf,
    /// The cluster's id (`[cluster] cluster_id`), named in the CA.
    #[arg(long, default_value = "trawl")]
    cluster_id: String,
    /// The ids of the nodes to make certificates for.
    #[arg(required = true)]
    nodes: Vec<String>,
}

/// Makes the CA, each node's certificate and key, and the gossip key
/// (whatever is missing), then prints the `[cluster]` settings of each
/// node.
pub fn main(args: CertsArgs) -> anyhow::Result<ExitCode> {
    let certs = CertsDir::new(&args.out);
    let written = certs.make(&args.cluster_id, &args.nodes)?;
    for path in &written {
        eprintln!("wrote {}", path.display());
    }
    eprintln!(
        "Copy ca.pem, gossip.key and each node's .pem and .key to that node; \
         keep ca.key off the nodes (it makes new certificates)."
    );
    for node in &args.nodes {
        println!("# node {node}\n[cluster]\n{}", certs.toml(node));
    }
    Ok(ExitCode::SUCCESS)
}
