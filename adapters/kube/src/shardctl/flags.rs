//! The `shard-controller` command line: upstream's sharding-controller flags (`--scheduler-configs`,
//! `--shard-sync-period`, `--enable-node-event-trigger`, `--sharding-configmap[-namespace]`), the
//! client, leader-election, health and metrics flags, klog's flags and Magma's `--dry-run`, in the
//! same Go/pflag syntax as `agent-scheduler` (it reuses [`crate::flags`]' normaliser, clap error
//! mapping and Go value parsers). Owns argv only: no file, network or environment access.
//!
//! Every invalid value is rejected here with a message naming the flag, including each
//! `--scheduler-configs` entry (parsed into a [`ShardingConfig`] so `--dry-run` checks it too).

use crate::flags::{
    FlagError, KlogFlags, Options as SchedulerOptions, from_clap, invalid, named_address_error,
    normalise, parse_duration_flag, parse_go_bool, parse_go_f32, parse_go_u8, parse_go_u32,
    positive_f32, positive_u32, validate_leader_election,
};
use crate::leader::LeaseConfig;
use crate::shardctl::ShardingConfig;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::Duration;

/// Default Lease name of the controller (not the scheduler's: both may run in one namespace).
pub const DEFAULT_LEASE_NAME: &str = "magma-shard-controller";

/// The parsed command line. Field names follow the flags.
#[derive(Debug, Clone, PartialEq, Parser)]
#[command(
    name = "shard-controller",
    about = "Magma's sharding controller: keeps one NodeShard per scheduler, computed from the \
             sharding ConfigMap (Volcano's sharding-controller, as a standalone binary)",
    disable_version_flag = true,
    args_override_self = true,
    after_help = "Flags follow Go's syntax: --flag=value, --flag value, -flag=value and -flag \
                  value are equivalent; a boolean flag alone means true and takes a value only \
                  with '=' (--leader-elect=false). Durations use Go's format (300ms, 1.5h)."
)]
pub struct ControllerOptions {
    /// Path to kubeconfig file with authorization and master location information
    #[arg(long, default_value = "")]
    pub kubeconfig: String,
    /// The address of the Kubernetes API server (overrides any value in kubeconfig)
    #[arg(long, default_value = "")]
    pub master: String,
    /// Deprecated: scheduler shards as name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes;
    /// repeatable and comma-separated; used only when the sharding ConfigMap is absent
    #[arg(long, value_name = "ENTRY", action = ArgAction::Append, value_delimiter = ',',
          default_values_t = crate::shardctl::config::DEFAULT_FLAG_CONFIGS.map(String::from))]
    pub scheduler_configs: Vec<String>,
    /// Period of the full shard resync (used when the ConfigMap does not set shardSyncPeriod; 0 = 120s)
    #[arg(long, default_value = "60s", value_parser = parse_duration_flag)]
    pub shard_sync_period: Duration,
    /// Resync on node add/delete/change and significant utilisation changes (flag configs only)
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool)]
    pub enable_node_event_trigger: bool,
    /// Name of the sharding ConfigMap (key sharding.yaml)
    #[arg(long, default_value = "volcano-sharding-configmap")]
    pub sharding_configmap: String,
    /// Namespace of the sharding ConfigMap
    #[arg(long, default_value = "volcano-system")]
    pub sharding_configmap_namespace: String,
    /// QPS of the controller's API requests other than watches (must be > 0)
    #[arg(long, default_value = "50", value_parser = parse_go_f32)]
    pub kube_api_qps: f32,
    /// Burst of the controller's API requests (must be > 0)
    #[arg(long, default_value = "100", value_parser = parse_go_u32)]
    pub kube_api_burst: u32,

    /// Start a leader election client and gain leadership before writing NodeShards
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool, help_heading = "Leader election")]
    pub leader_elect: bool,
    /// How long a non-leader waits after observing a renewal before acquiring the lease
    #[arg(long, default_value = "15s", value_parser = parse_duration_flag, help_heading = "Leader election")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps retrying to renew before it gives up
    #[arg(long, default_value = "10s", value_parser = parse_duration_flag, help_heading = "Leader election")]
    pub leader_elect_renew_deadline: Duration,
    /// Wait between attempts to acquire or renew leadership
    #[arg(long, default_value = "2s", value_parser = parse_duration_flag, help_heading = "Leader election")]
    pub leader_elect_retry_period: Duration,
    /// The lock object type; only "leases" is supported
    #[arg(long, default_value = "leases", help_heading = "Leader election")]
    pub leader_elect_resource_lock: String,
    /// The name of the Lease
    #[arg(long, default_value = DEFAULT_LEASE_NAME, help_heading = "Leader election")]
    pub leader_elect_resource_name: String,
    /// The namespace of the Lease
    #[arg(
        long,
        default_value = "volcano-system",
        help_heading = "Leader election"
    )]
    pub leader_elect_resource_namespace: String,

    /// The address of the metrics server (served when --enable-metrics is set)
    #[arg(long, default_value = ":8081")]
    pub listen_address: String,
    /// Serve Prometheus metrics on --listen-address
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub enable_metrics: bool,
    /// The address of the health check server (served when --enable-healthz is set)
    #[arg(long, default_value = ":11252")]
    pub healthz_address: String,
    /// Serve /healthz and /readyz on --healthz-address
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub enable_healthz: bool,

    /// Log verbosity (klog's -v): 0 = info, 2+ = debug, 5+ = trace
    #[arg(long = "v", short = 'v', value_name = "LEVEL", default_value = "0", value_parser = parse_go_u8)]
    pub verbosity: u8,
    /// Print the version and exit
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub version: bool,
    /// Magma: check the flags (and the --scheduler-configs entries), print the result and exit
    /// (0 when valid) without contacting the API server
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool, help_heading = "Magma extras")]
    pub dry_run: bool,

    #[command(flatten)]
    pub klog: KlogFlags,

    /// The configuration built from `--scheduler-configs`, `--shard-sync-period` and
    /// `--enable-node-event-trigger` (used when the ConfigMap is absent); set by [`parse`].
    #[arg(skip)]
    pub flag_config: Option<ShardingConfig>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        parse(["shard-controller"]).expect("the defaults are valid")
    }
}

/// Parse argv (including argv\[0\]) and validate it.
pub fn parse<I, S>(args: I) -> Result<ControllerOptions, FlagError>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            let a: OsString = a.into();
            a.into_string()
                .map_err(|a| FlagError::Other(format!("argument {a:?} is not valid UTF-8")))
        })
        .collect::<Result<_, _>>()?;
    let cmd = ControllerOptions::command();
    let normalised = normalise(&cmd, args)?;
    let matches = cmd.try_get_matches_from(normalised).map_err(from_clap)?;
    let mut o = ControllerOptions::from_arg_matches(&matches).map_err(from_clap)?;
    o.flag_config = Some(o.validate()?);
    Ok(o)
}

/// The `--help` text.
pub fn usage() -> String {
    ControllerOptions::command().render_help().to_string()
}

impl ControllerOptions {
    /// Range and consistency checks; returns the flag configuration.
    pub fn validate(&self) -> Result<ShardingConfig, FlagError> {
        positive_f32("kube-api-qps", self.kube_api_qps)?;
        positive_u32("kube-api-burst", self.kube_api_burst)?;
        if self.sharding_configmap.is_empty() {
            return Err(invalid("sharding-configmap", "", "must not be empty"));
        }
        if self.sharding_configmap_namespace.is_empty() {
            return Err(invalid(
                "sharding-configmap-namespace",
                "",
                "must not be empty",
            ));
        }
        if self.leader_elect {
            validate_leader_election(
                self.leader_elect_lease_duration,
                self.leader_elect_renew_deadline,
                self.leader_elect_retry_period,
                &self.leader_elect_resource_lock,
                &self.leader_elect_resource_name,
                &self.leader_elect_resource_namespace,
            )?;
        }
        if self.enable_healthz {
            self.healthz_addr()?;
        }
        if self.enable_metrics {
            self.listen_addr()?;
        }
        let entries: Vec<&str> = self
            .scheduler_configs
            .iter()
            .map(String::as_str)
            .filter(|e| !e.trim().is_empty())
            .collect();
        if entries.is_empty() {
            return Err(invalid(
                "scheduler-configs",
                "",
                "needs at least one name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes entry",
            ));
        }
        ShardingConfig::from_flags(
            &entries,
            self.shard_sync_period,
            self.enable_node_event_trigger,
        )
        .map_err(|e| invalid("scheduler-configs", &entries.join(","), &e.to_string()))
    }

    /// `--listen-address` as a socket address.
    pub fn listen_addr(&self) -> Result<SocketAddr, FlagError> {
        SchedulerOptions::http_addr(&self.listen_address)
            .map_err(|e| named_address_error("listen-address", &self.listen_address, e))
    }

    /// `--healthz-address` as a socket address.
    pub fn healthz_addr(&self) -> Result<SocketAddr, FlagError> {
        SchedulerOptions::http_addr(&self.healthz_address)
            .map_err(|e| named_address_error("healthz-address", &self.healthz_address, e))
    }

    /// The Lease to elect on, `None` with `--leader-elect=false`.
    pub fn lease(&self) -> Option<LeaseConfig> {
        self.leader_elect.then(|| LeaseConfig {
            name: self.leader_elect_resource_name.clone(),
            namespace: self.leader_elect_resource_namespace.clone(),
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            ..LeaseConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<ControllerOptions, FlagError> {
        parse(std::iter::once("shard-controller").chain(args.iter().copied()))
    }

    fn err(args: &[&str]) -> String {
        match p(args) {
            Ok(o) => panic!("{args:?} should be rejected, got {o:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_are_the_promised_ones() {
        let o = ControllerOptions::default();
        assert_eq!(
            o.scheduler_configs,
            [
                "volcano:volcano:0.0:0.6:false:2:100",
                "agent-scheduler:agent:0.7:1.0:true:2:100"
            ]
        );
        assert_eq!(o.shard_sync_period, Duration::from_secs(60));
        assert!(o.enable_node_event_trigger);
        assert_eq!(o.sharding_configmap, "volcano-sharding-configmap");
        assert_eq!(o.sharding_configmap_namespace, "volcano-system");
        assert_eq!((o.kube_api_qps, o.kube_api_burst), (50.0, 100));
        assert!(o.leader_elect);
        assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(o.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(o.leader_elect_retry_period, Duration::from_secs(2));
        assert_eq!(o.leader_elect_resource_lock, "leases");
        assert_eq!(o.leader_elect_resource_name, "magma-shard-controller");
        assert_eq!(o.leader_elect_resource_namespace, "volcano-system");
        assert_eq!(o.listen_address, ":8081");
        assert!(!o.enable_metrics);
        assert_eq!(o.healthz_address, ":11252");
        assert!(!o.enable_healthz);
        assert_eq!(o.verbosity, 0);
        assert!(!o.version && !o.dry_run);
        let c = o.flag_config.clone().expect("flag config");
        let names: Vec<&str> = c.schedulers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["volcano", "agent-scheduler"]);
        assert_eq!(c.shard_sync_period, Duration::from_secs(60));
        let lease = o.lease().expect("leader election is on by default");
        assert_eq!(lease.name, "magma-shard-controller");
    }

    #[test]
    fn go_syntax_repeated_and_comma_separated_configs() {
        let o = p(&[
            "-scheduler-configs",
            "a:agent:0.5:1:true:1:3,b:volcano:0:0.5:false:0:0",
            "--scheduler-configs=c:x:0:1:f:0:0",
            "--enable-node-event-trigger=false",
            "--shard-sync-period",
            "1m30s",
            "-v=4",
            "--leader-elect=false",
            "--dry-run",
            "--logtostderr",
        ])
        .expect("valid");
        assert_eq!(o.scheduler_configs.len(), 3);
        let c = o.flag_config.clone().expect("config");
        let names: Vec<&str> = c.schedulers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(!c.enable_node_event_trigger);
        assert_eq!(c.shard_sync_period, Duration::from_secs(90));
        assert_eq!(o.verbosity, 4);
        assert!(o.dry_run && !o.leader_elect && o.lease().is_none());
    }

    #[test]
    fn zero_sync_period_means_the_fallback() {
        let o = p(&["--shard-sync-period=0"]).expect("valid");
        assert_eq!(
            o.flag_config.expect("config").shard_sync_period,
            crate::shardctl::config::FALLBACK_SYNC_PERIOD
        );
    }

    #[test]
    fn every_invalid_value_names_its_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--scheduler-configs=a:b:c"], "scheduler-configs"),
            (
                &["--scheduler-configs=a:agent:0.9:0.1:true:1:3"],
                "scheduler-configs",
            ),
            (
                &["--scheduler-configs=a:agent:0:1:maybe:1:3"],
                "scheduler-configs",
            ),
            (
                &["--scheduler-configs=a:x:0:1:t:0:0,a:y:0:1:t:0:0"],
                "scheduler-configs",
            ),
            (&["--scheduler-configs="], "scheduler-configs"),
            (&["--shard-sync-period=fast"], "shard-sync-period"),
            (&["--shard-sync-period=-1s"], "shard-sync-period"),
            (
                &["--enable-node-event-trigger=yes"],
                "enable-node-event-trigger",
            ),
            (&["--kube-api-qps=0"], "kube-api-qps"),
            (&["--kube-api-burst=0"], "kube-api-burst"),
            (
                &["--leader-elect-lease-duration=5s"],
                "leader-elect-lease-duration",
            ),
            (
                &["--leader-elect-resource-lock=endpoints"],
                "leader-elect-resource-lock",
            ),
            (
                &["--leader-elect-resource-name="],
                "leader-elect-resource-name",
            ),
            (
                &["--enable-metrics", "--listen-address=nope"],
                "listen-address",
            ),
            (
                &["--enable-healthz", "--healthz-address=:99999"],
                "healthz-address",
            ),
            (&["--sharding-configmap="], "sharding-configmap"),
            (
                &["--sharding-configmap-namespace="],
                "sharding-configmap-namespace",
            ),
            (&["-v=x"], "v"),
            (&["--no-such-flag"], "no-such-flag"),
        ];
        for (args, flag) in cases {
            let msg = err(args);
            assert!(msg.contains(flag), "{args:?}: {msg:?} does not name {flag}");
        }
    }

    #[test]
    fn leader_flags_are_unchecked_without_leader_election() {
        p(&["--leader-elect=false", "--leader-elect-lease-duration=1s"]).expect("valid");
    }

    #[test]
    fn help_is_reported_as_help() {
        let e = p(&["--help"]).expect_err("help");
        assert!(e.is_help());
        for flag in [
            "--scheduler-configs",
            "--sharding-configmap-namespace",
            "--dry-run",
        ] {
            assert!(e.to_string().contains(flag), "{flag} in help");
        }
        assert!(usage().contains("--shard-sync-period"));
    }
}
