//! The upstream-compatible command line: every flag `vc-agent-scheduler` registers (its own, the
//! component-base leader-election flags, `--feature-gates` and klog's), with upstream's defaults
//! and Go/pflag syntax, plus validation upstream lacks and Magma's own extras.
//!
//! Parsing is two steps. `normalise` rewrites argv the way Go's `flag`/pflag reads it into one
//! canonical `--name=value` token per flag: one or two dashes, `=value` or the next argument as the
//! value of a non-boolean flag, a bare boolean meaning `true` (`--leader-elect false` leaves
//! `false` as a positional argument, which is an error), `_` read as `-` (cliflag's word-separator
//! normalisation, so klog's `--log_dir` and `--log-dir` are the same flag), `-v 4`/`-v4` for the
//! verbosity. It rejects unknown flags by name. Then clap, the single source of flag names, help
//! text and defaults, types the values with Go's parsers ([`parse_go_bool`],
//! [`parse_go_duration`], base-0 integers). Last occurrence wins for scalars; `--node-selector`
//! accumulates.
//!
//! Owns argv only: no file, network or environment access (`http_addr` resolves a host name if one
//! is given instead of an IP address).

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use magma_engine::Sampling;
use magma_engine::conf::ConfError;
use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Why the command line was rejected. Every message names the flag and the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlagError {
    /// `--help`/`-h` was given: the payload is the usage text. The caller prints it to stdout and
    /// exits 0 (see [`FlagError::is_help`]).
    #[error("{0}")]
    Help(String),
    #[error("flag provided but not defined: {flag}")]
    Unknown { flag: String },
    #[error("flag needs an argument: --{flag}")]
    MissingValue { flag: String },
    #[error("bad flag syntax: {arg}")]
    BadSyntax { arg: String },
    #[error(
        "unexpected argument {arg:?}: this command takes no positional arguments (a boolean \
         flag's value must be attached with '=', e.g. --leader-elect=false)"
    )]
    UnexpectedArgument { arg: String },
    /// The value does not parse as the flag's type.
    #[error("invalid value {value:?} for flag --{flag}: {reason}")]
    InvalidValue {
        flag: String,
        value: String,
        reason: String,
    },
    /// The value parses but is out of range or inconsistent with another flag.
    #[error("invalid --{flag}={value}: {reason}")]
    Invalid {
        flag: String,
        value: String,
        reason: String,
    },
    /// Upstream's only custom check, kept word for word.
    #[error("scheduler-worker-count must be greater than 0")]
    WorkerCount,
    #[error("invalid listen address {addr:?}: {reason}")]
    Address { addr: String, reason: String },
    #[error("{0}")]
    Other(String),
}

impl FlagError {
    /// `--help` was asked for: print the error's text to stdout and exit 0.
    pub fn is_help(&self) -> bool {
        matches!(self, FlagError::Help(_))
    }
}

/// `--scheduler-sharding-mode` (the engine's type: none, soft or hard).
pub use magma_engine::ShardingMode;

/// klog's flags. Accepted so the chart's and users' command lines keep working; only `-v`
/// (on `Options::verbosity`) has an effect — Magma logs through `tracing` to stderr.
#[derive(Debug, Clone, PartialEq, clap::Args)]
#[command(next_help_heading = "klog flags (accepted, no effect; use -v for verbosity)")]
pub struct KlogFlags {
    /// log to standard error instead of files
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool)]
    pub logtostderr: bool,
    /// log to standard error as well as files
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub alsologtostderr: bool,
    /// if non-empty, write log files in this directory
    #[arg(long, default_value = "")]
    pub log_dir: String,
    /// if non-empty, use this log file
    #[arg(long, default_value = "")]
    pub log_file: String,
    /// maximum size of a log file in megabytes (0 = unlimited)
    #[arg(long, default_value = "1800", value_parser = parse_go_u64)]
    pub log_file_max_size: u64,
    /// logs at or above this threshold go to stderr (INFO, WARNING, ERROR, FATAL or 0..=3)
    #[arg(long, default_value = "2", value_parser = parse_severity)]
    pub stderrthreshold: u8,
    /// comma-separated list of pattern=N settings for file-filtered logging
    #[arg(long, default_value = "")]
    pub vmodule: String,
    /// if true, adds the file directory to the header of the log messages
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub add_dir_header: bool,
    /// if true, avoid header prefixes in the log messages
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub skip_headers: bool,
    /// if true, avoid headers when opening log files
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub skip_log_headers: bool,
    /// if true, only write logs to their native severity level
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub one_output: bool,
    /// when logging hits line file:N, emit a stack trace
    #[arg(long, default_value = "")]
    pub log_backtrace_at: String,
    /// maximum time between log flushes
    #[arg(long, default_value = "5s", value_parser = parse_duration_flag)]
    pub log_flush_frequency: Duration,
}

/// Flags Volcano's Helm chart passes that upstream's agent binary does not define (so upstream
/// fails to start, §11 item 16). Magma accepts them and records a warning.
#[derive(Debug, Clone, PartialEq, clap::Args)]
#[command(next_help_heading = "Accepted for Volcano Helm chart compatibility, ignored")]
pub struct HelmExtras {
    /// ignored (the agent scheduler serves no pprof)
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub enable_pprof: bool,
    /// ignored (the agent scheduler loads no plugin binaries)
    #[arg(long, default_value = "")]
    pub plugins_dir: String,
    /// ignored (the agent scheduler does no volume binding)
    #[arg(long, value_delimiter = ',')]
    pub ignored_provisioners: Vec<String>,
}

/// The parsed command line. Field names follow the flags; defaults are upstream's (§1.2).
#[derive(Debug, Clone, PartialEq, Parser)]
#[command(
    name = "agent-scheduler",
    about = "Magma: a drop-in replacement for Volcano's agent-scheduler",
    disable_version_flag = true,
    args_override_self = true,
    after_help = "Flags follow Go's syntax: --flag=value, --flag value, -flag=value and -flag \
                  value are equivalent; a boolean flag alone means true and takes a value only \
                  with '=' (--leader-elect=false). Underscores in flag names read as dashes \
                  (--log_dir = --log-dir). Durations use Go's format (300ms, 1.5h, 2h45m)."
)]
pub struct Options {
    /// The address of the Kubernetes API server (overrides any value in kubeconfig)
    #[arg(long, default_value = "")]
    pub master: String,
    /// Path to kubeconfig file with authorization and master location information
    #[arg(long, default_value = "")]
    pub kubeconfig: String,
    /// File containing the x509 Certificate for HTTPS (healthz only; used if all three TLS flags are set)
    #[arg(long, default_value = "")]
    pub ca_cert_file: String,
    /// File containing the default x509 Certificate for HTTPS (healthz only)
    #[arg(long, default_value = "")]
    pub tls_cert_file: String,
    /// File containing the default x509 private key matching --tls-cert-file
    #[arg(long, default_value = "")]
    pub tls_private_key_file: String,
    /// Deprecated: use --leader-elect-resource-namespace. If non-empty it overrides that flag
    #[arg(long, default_value = "")]
    pub lock_object_namespace: String,
    /// Schedule pods whose .spec.schedulerName equals this; also the event source
    #[arg(long, default_value = "agent-scheduler")]
    pub scheduler_name: String,
    /// Path of the scheduler configuration file; its directory is watched for changes
    #[arg(long, default_value = "")]
    pub scheduler_conf: String,
    /// Informer resync period (0 = off)
    #[arg(long, default_value = "0", value_parser = parse_duration_flag)]
    pub resync_period: Duration,
    /// Print the version and exit
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub version: bool,
    /// The address of the metrics server (served when --enable-metrics is set)
    #[arg(long, default_value = ":8080")]
    pub listen_address: String,
    /// The address of the health check server (served when --enable-healthz is set)
    #[arg(long, default_value = ":11251")]
    pub healthz_address: String,
    /// QPS to use while talking with the Kubernetes API server (must be > 0)
    #[arg(long, default_value = "2000", value_parser = parse_go_f32)]
    pub kube_api_qps: f32,
    /// Burst to use while talking with the Kubernetes API server (must be > 0)
    #[arg(long, default_value = "2000", value_parser = parse_go_u32)]
    pub kube_api_burst: u32,
    /// The minimum number of feasible nodes to find and score
    #[arg(long, default_value = "100", value_parser = parse_go_i32)]
    pub minimum_feasible_nodes: i32,
    /// The minimum percentage of nodes to find and score
    #[arg(long, default_value = "5", value_parser = parse_go_i32)]
    pub minimum_percentage_nodes_to_find: i32,
    /// The percentage of nodes to find and score; 0 = adaptive to the cluster size
    #[arg(long, default_value = "0", value_parser = parse_go_i32)]
    pub percentage_nodes_to_find: i32,
    /// Track CSI storage capacity
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool)]
    pub csi_storage: bool,
    /// Serve /healthz on --healthz-address
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub enable_healthz: bool,
    /// Serve Prometheus metrics on --listen-address
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub enable_metrics: bool,
    /// Only cache nodes with one of these labels, key:value; repeatable and comma-separated
    #[arg(long, value_name = "KEY:VALUE", action = ArgAction::Append, value_delimiter = ',', value_parser = parse_node_selector)]
    pub node_selector: Vec<(String, String)>,
    /// SIGUSR1 dumps the node cache as JSON into --cache-dump-dir
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool)]
    pub cache_dumper: bool,
    /// Directory for cache dumps
    #[arg(long, default_value = "/tmp")]
    pub cache_dump_dir: String,
    /// The number of threads syncing node operations
    #[arg(long, default_value = "20", value_parser = parse_go_u32)]
    pub node_worker_threads: u32,
    /// How long to wait for the initial resource sync before scheduling (0 = don't wait)
    #[arg(long, default_value = "60s", value_parser = parse_duration_flag)]
    pub resource_sync_timeout: Duration,
    /// Make a missing or invalid --scheduler-conf fatal instead of falling back to the default
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub disable_default_scheduler_config: bool,
    /// The number of workers scheduling in parallel (> 0); one runs on the engine's driver thread
    #[arg(long, default_value = "1", value_parser = parse_go_u32)]
    pub scheduler_worker_count: u32,
    /// Node sharding mode: none, soft or hard
    #[arg(long, value_name = "MODE", default_value = "none", value_parser = parse_sharding_mode)]
    pub scheduler_sharding_mode: ShardingMode,
    /// The name of the NodeShard this scheduler uses in soft/hard mode
    #[arg(long, default_value = "agent-scheduler")]
    pub scheduler_sharding_name: String,

    /// Start a leader election client and gain leadership before scheduling
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
    #[arg(
        long,
        default_value = "agent-scheduler",
        help_heading = "Leader election"
    )]
    pub leader_elect_resource_name: String,
    /// The namespace of the Lease
    #[arg(
        long,
        default_value = "volcano-system",
        help_heading = "Leader election"
    )]
    pub leader_elect_resource_namespace: String,

    /// Feature gates, Key=bool,... (accepted and recorded; Magma has no feature gates)
    #[arg(long, default_value = "", value_parser = parse_feature_gates)]
    pub feature_gates: String,
    /// Log verbosity (klog's -v): 0 = info, 4+ = debug, 6+ = trace
    #[arg(long = "v", short = 'v', value_name = "LEVEL", default_value = "0", value_parser = parse_go_u8)]
    pub verbosity: u8,

    /// Magma: pin scheduling workers to CPU cores (one worker: the engine thread that runs it)
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool, help_heading = "Magma extras")]
    pub pin_workers: bool,
    /// Magma: maximum concurrent bind requests (> 0)
    #[arg(long, default_value = "256", value_parser = parse_go_usize, help_heading = "Magma extras")]
    pub bind_concurrency: usize,
    /// Magma: QPS of the separate events client (Scheduled, FailedScheduling; > 0). Default:
    /// --kube-api-qps, so every bound pod's event keeps up with the bindings; a lower value sheds
    /// a burst's surplus (counted in magma_events_dropped_total)
    #[arg(long, value_parser = parse_go_f32, help_heading = "Magma extras")]
    pub event_qps: Option<f32>,
    /// Magma: burst of the events client (> 0). Default: --kube-api-burst
    #[arg(long, value_parser = parse_go_u32, help_heading = "Magma extras")]
    pub event_burst: Option<u32>,
    /// Magma: DefaultPreemption, as kube-scheduler's: a pod that fits nowhere evicts pods of
    /// lower priority to make room (false: it waits, as under Volcano's agent-scheduler)
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool, help_heading = "Magma extras")]
    pub preemption: bool,
    /// Magma: check the flags and the --scheduler-conf file, print the result and exit
    /// (0 when valid) without contacting the API server
    #[arg(long, action = ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool, help_heading = "Magma extras")]
    pub dry_run: bool,

    #[command(flatten)]
    pub klog: KlogFlags,
    #[command(flatten)]
    pub helm_extras: HelmExtras,

    /// Things the command line asked for that Magma accepts but ignores or that are deprecated,
    /// for the log.
    #[arg(skip)]
    pub warnings: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        parse(["agent-scheduler"]).expect("the defaults are valid")
    }
}

/// Parse argv (including argv\[0\]) the way upstream's binary does, then [`Options::validate`].
pub fn parse<I, S>(args: I) -> Result<Options, FlagError>
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
    let cmd = Options::command();
    let normalised = normalise(&cmd, args)?;
    let matches = cmd.try_get_matches_from(normalised).map_err(from_clap)?;
    let mut o = Options::from_arg_matches(&matches).map_err(from_clap)?;

    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    if given("enable_pprof") {
        o.warnings.push(
            "--enable-pprof is ignored: the agent scheduler serves no pprof (flag accepted for \
             Volcano Helm chart compatibility)"
                .into(),
        );
    }
    if given("plugins_dir") {
        o.warnings.push(
            "--plugins-dir is ignored: the agent scheduler loads no plugin binaries (flag \
             accepted for Volcano Helm chart compatibility)"
                .into(),
        );
    }
    if given("ignored_provisioners") {
        o.warnings.push(
            "--ignored-provisioners is ignored: the agent scheduler does no volume binding \
             (flag accepted for Volcano Helm chart compatibility)"
                .into(),
        );
    }
    if !o.lock_object_namespace.is_empty() {
        o.warnings.push(format!(
            "--lock-object-namespace is deprecated, use --leader-elect-resource-namespace; \
             overriding the lease namespace {:?} with {:?}",
            o.leader_elect_resource_namespace, o.lock_object_namespace
        ));
        o.leader_elect_resource_namespace = o.lock_object_namespace.clone();
    }
    let tls_given = [&o.ca_cert_file, &o.tls_cert_file, &o.tls_private_key_file]
        .iter()
        .filter(|f| !f.is_empty())
        .count();
    if tls_given == 3 {
        o.warnings.push(
            "--ca-cert-file, --tls-cert-file and --tls-private-key-file are accepted but not used: \
             Magma serves /healthz over plain HTTP (upstream serves it over TLS with them)"
                .into(),
        );
    } else if tls_given > 0 {
        o.warnings.push(
            "only some of --ca-cert-file, --tls-cert-file and --tls-private-key-file are set: \
             like upstream, they are ignored unless all three are"
                .into(),
        );
    }
    if !o.feature_gates.is_empty() {
        o.warnings.push(format!(
            "--feature-gates={} recorded but has no effect: Magma has no feature gates",
            o.feature_gates
        ));
    }
    o.validate()?;
    Ok(o)
}

/// The `--help` text.
pub fn usage() -> String {
    Options::command().render_help().to_string()
}

impl Options {
    /// `--event-qps`, or `--kube-api-qps` when not given.
    pub fn event_qps(&self) -> f32 {
        self.event_qps.unwrap_or(self.kube_api_qps)
    }

    /// `--event-burst`, or `--kube-api-burst` when not given.
    pub fn event_burst(&self) -> u32 {
        self.event_burst.unwrap_or(self.kube_api_burst)
    }

    /// The checks upstream makes (worker count, component-base's leader-election validation) and
    /// those it misses (sharding mode is checked while parsing; sampling, rates, addresses).
    pub fn validate(&self) -> Result<(), FlagError> {
        if self.scheduler_worker_count == 0 {
            return Err(FlagError::WorkerCount);
        }
        self.sampling()?;
        positive_f32("kube-api-qps", self.kube_api_qps)?;
        positive_u32("kube-api-burst", self.kube_api_burst)?;
        if self.bind_concurrency == 0 {
            return Err(invalid("bind-concurrency", "0", "must be greater than 0"));
        }
        positive_f32("event-qps", self.event_qps())?;
        positive_u32("event-burst", self.event_burst())?;
        if self.scheduler_name.is_empty() {
            return Err(invalid("scheduler-name", "", "must not be empty"));
        }
        if self.scheduler_sharding_mode != ShardingMode::None
            && self.scheduler_sharding_name.is_empty()
        {
            return Err(invalid(
                "scheduler-sharding-name",
                "",
                "must not be empty when --scheduler-sharding-mode is soft or hard",
            ));
        }
        if self.leader_elect {
            self.validate_leader_election()?;
        }
        if self.enable_healthz {
            self.healthz_addr()?;
        }
        if self.enable_metrics {
            self.listen_addr()?;
        }
        Ok(())
    }

    /// component-base's `ValidateLeaderElectionConfiguration` (only when `--leader-elect`), plus
    /// client-go's `renewDeadline > retryPeriod × JitterFactor (1.2)` check from
    /// `NewLeaderElector`, which upstream would hit only at startup.
    fn validate_leader_election(&self) -> Result<(), FlagError> {
        validate_leader_election(
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
            &self.leader_elect_resource_lock,
            &self.leader_elect_resource_name,
            &self.leader_elect_resource_namespace,
        )
    }

    /// The engine's feasible-node sampling from the three sampling flags.
    pub fn sampling(&self) -> Result<Sampling, FlagError> {
        Sampling::new(
            i64::from(self.minimum_feasible_nodes),
            i64::from(self.minimum_percentage_nodes_to_find),
            i64::from(self.percentage_nodes_to_find),
        )
        .map_err(|e| match e {
            ConfError::Sampling { name, value, why } => FlagError::Invalid {
                flag: name.to_owned(),
                value: value.to_string(),
                reason: why.to_owned(),
            },
            other => FlagError::Other(other.to_string()),
        })
    }

    /// Turn a Go listen address (`:8080`, `0.0.0.0:8080`, `[::]:8080`, `localhost:0`,
    /// `host:port`) into a socket address. An empty host means all IPv4 interfaces; a host name
    /// is resolved (first address wins).
    pub fn http_addr(s: &str) -> Result<SocketAddr, FlagError> {
        let err = |reason: &str| FlagError::Address {
            addr: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| err("missing port (expected host:port or :port)"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| err("the port must be a number within 0..=65535"))?;
        let host = match host.strip_prefix('[') {
            Some(h) => h
                .strip_suffix(']')
                .ok_or_else(|| err("unbalanced '[' in the host"))?,
            None if host.contains(':') => {
                return Err(err("an IPv6 host must be in brackets, e.g. [::1]:8080"));
            }
            None => host,
        };
        if host.is_empty() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        if host == "localhost" {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
        }
        (host, port)
            .to_socket_addrs()
            .map_err(|e| err(&format!("cannot resolve host {host:?}: {e}")))?
            .next()
            .ok_or_else(|| err(&format!("host {host:?} resolves to no address")))
    }

    /// `--listen-address` as a socket address.
    pub fn listen_addr(&self) -> Result<SocketAddr, FlagError> {
        Self::http_addr(&self.listen_address)
            .map_err(|e| named_address_error("listen-address", &self.listen_address, e))
    }

    /// `--healthz-address` as a socket address.
    pub fn healthz_addr(&self) -> Result<SocketAddr, FlagError> {
        Self::http_addr(&self.healthz_address)
            .map_err(|e| named_address_error("healthz-address", &self.healthz_address, e))
    }

    /// True when all three TLS files are given (upstream then serves healthz over TLS).
    pub fn tls_enabled(&self) -> bool {
        !self.ca_cert_file.is_empty()
            && !self.tls_cert_file.is_empty()
            && !self.tls_private_key_file.is_empty()
    }
}

/// component-base's `ValidateLeaderElectionConfiguration` plus client-go's `renewDeadline >
/// retryPeriod × JitterFactor (1.2)` check; shared by both binaries' flags.
pub(crate) fn validate_leader_election(
    lease: Duration,
    renew: Duration,
    retry: Duration,
    lock: &str,
    name: &str,
    namespace: &str,
) -> Result<(), FlagError> {
    for (flag, d) in [
        ("leader-elect-lease-duration", lease),
        ("leader-elect-renew-deadline", renew),
        ("leader-elect-retry-period", retry),
    ] {
        if d.is_zero() {
            return Err(invalid(flag, "0s", "must be greater than zero"));
        }
    }
    if lease <= renew {
        return Err(invalid(
            "leader-elect-lease-duration",
            &fmt_duration(lease),
            &format!(
                "must be greater than --leader-elect-renew-deadline ({})",
                fmt_duration(renew)
            ),
        ));
    }
    if renew.as_secs_f64() <= retry.as_secs_f64() * 1.2 {
        return Err(invalid(
            "leader-elect-renew-deadline",
            &fmt_duration(renew),
            &format!(
                "must be greater than 1.2 × --leader-elect-retry-period ({})",
                fmt_duration(retry)
            ),
        ));
    }
    if lock != "leases" {
        return Err(invalid(
            "leader-elect-resource-lock",
            lock,
            "only \"leases\" is supported",
        ));
    }
    if name.is_empty() {
        return Err(invalid(
            "leader-elect-resource-name",
            "",
            "must not be empty",
        ));
    }
    if namespace.is_empty() {
        return Err(invalid(
            "leader-elect-resource-namespace",
            "",
            "must not be empty",
        ));
    }
    Ok(())
}

pub(crate) fn named_address_error(flag: &str, value: &str, e: FlagError) -> FlagError {
    match e {
        FlagError::Address { reason, .. } => invalid(flag, value, &reason),
        other => other,
    }
}

pub(crate) fn invalid(flag: &str, value: &str, reason: &str) -> FlagError {
    FlagError::Invalid {
        flag: flag.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

pub(crate) fn positive_f32(flag: &str, v: f32) -> Result<(), FlagError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(flag, &v.to_string(), "must be a finite number > 0"))
    }
}

pub(crate) fn positive_u32(flag: &str, v: u32) -> Result<(), FlagError> {
    if v > 0 {
        Ok(())
    } else {
        Err(invalid(flag, "0", "must be greater than 0"))
    }
}

/// Rewrite argv into `argv0 --name=value ...` (see the module doc). `args[0]` is kept.
pub(crate) fn normalise(cmd: &clap::Command, args: Vec<String>) -> Result<Vec<String>, FlagError> {
    let mut it = args.into_iter();
    let mut out: Vec<String> = it.next().into_iter().collect();
    if out.is_empty() {
        out.push("agent-scheduler".into());
    }
    while let Some(arg) = it.next() {
        if arg == "--" {
            // Go stops parsing flags here; we take no positional arguments.
            return match it.next() {
                Some(a) => Err(FlagError::UnexpectedArgument { arg: a }),
                None => Ok(out),
            };
        }
        let (dashes, body) = match arg.strip_prefix("--") {
            Some(b) => ("--", b),
            None => match arg.strip_prefix('-') {
                Some(b) if !b.is_empty() => ("-", b),
                _ => return Err(FlagError::UnexpectedArgument { arg }),
            },
        };
        if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
            return Err(FlagError::BadSyntax { arg });
        }
        let (raw_name, mut value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        let mut raw_name = raw_name;
        // pflag shorthand with the value glued on: -v4.
        if dashes == "-"
            && value.is_none()
            && raw_name.len() > 1
            && raw_name.starts_with('v')
            && raw_name[1..].bytes().all(|b| b.is_ascii_digit())
        {
            value = Some(raw_name[1..].to_owned());
            raw_name = "v";
        }
        let name = raw_name.replace('_', "-");
        if name == "h" || name == "help" {
            out.push("--help".into());
            continue;
        }
        let Some(def) = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(name.as_str()))
        else {
            return Err(FlagError::Unknown {
                flag: format!("{dashes}{raw_name}"),
            });
        };
        let is_bool = def
            .get_value_names()
            .is_some_and(|n| n.len() == 1 && n[0] == "BOOL");
        let value = match value {
            Some(v) => v,
            None if is_bool => "true".into(),
            None => it
                .next()
                .ok_or_else(|| FlagError::MissingValue { flag: name.clone() })?,
        };
        if name == "node-selector" && value.is_empty() {
            // Go's StringSlice reads "" as no entries.
            continue;
        }
        out.push(format!("--{name}={value}"));
    }
    Ok(out)
}

/// Turn a clap error into a [`FlagError`] naming the flag and value.
pub(crate) fn from_clap(e: clap::Error) -> FlagError {
    if matches!(e.kind(), ErrorKind::DisplayHelp) {
        return FlagError::Help(e.render().to_string());
    }
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    if matches!(
        e.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) && let (Some(arg), Some(value)) =
        (ctx(ContextKind::InvalidArg), ctx(ContextKind::InvalidValue))
    {
        // "--kube-api-qps <KUBE_API_QPS>" → "kube-api-qps".
        let flag = arg
            .split(['=', ' ', '['])
            .next()
            .unwrap_or(&arg)
            .trim_start_matches('-')
            .to_owned();
        let reason = std::error::Error::source(&e)
            .map(|s| s.to_string())
            .unwrap_or_else(|| "invalid value".into());
        return FlagError::InvalidValue {
            flag,
            value,
            reason,
        };
    }
    FlagError::Other(e.render().to_string().trim_end().to_owned())
}

// ---- Go value parsers -------------------------------------------------------------------------

/// Go's `strconv.ParseBool`: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err("not a boolean (use true/false, 1/0, t/f)".into()),
    }
}

/// Go's `time.ParseDuration`, returning signed nanoseconds: a sequence of decimal numbers with
/// optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), optional sign;
/// `0` alone needs no unit.
pub fn parse_go_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("invalid duration {s:?}");
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    const MAX: u128 = i64::MAX as u128;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..n];
            rest = &r[n..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: u128 = match unit {
            "" => return Err(format!("missing unit in duration {s:?}")),
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        let mut v: u128 = 0;
        for b in int_part.bytes() {
            v = v * 10 + u128::from(b - b'0');
            if v > MAX {
                return Err(invalid());
            }
        }
        let mut nanos = v * scale;
        // Like Go, fraction digits beyond what can matter are dropped (truncation).
        let mut f: u128 = 0;
        let mut div: u128 = 1;
        for b in frac_part.bytes().take(24) {
            f = f * 10 + u128::from(b - b'0');
            div *= 10;
        }
        nanos += f * scale / div;
        total += nanos;
        if total > MAX + u128::from(neg) {
            return Err(invalid());
        }
    }
    let total = total as i128;
    Ok(if neg { -total } else { total })
}

/// A duration flag: Go syntax, not negative.
pub(crate) fn parse_duration_flag(s: &str) -> Result<Duration, String> {
    let n = parse_go_duration(s)?;
    if n < 0 {
        return Err("must not be negative".into());
    }
    Ok(Duration::from_nanos(n as u64))
}

/// Format like Go's `Duration.String` for whole units (enough for messages).
pub(crate) fn fmt_duration(d: Duration) -> String {
    format!("{d:?}")
}

/// Go's `strconv.ParseInt(s, 0, 64)`: optional sign, `0x`/`0o`/`0b`/leading-`0` prefixes,
/// underscores between digits.
pub fn parse_go_int(s: &str) -> Result<i64, String> {
    let invalid = || "not an integer".to_owned();
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || digits.starts_with(['+', '-'])
    {
        return Err(invalid());
    }
    let digits: String = digits.chars().filter(|c| *c != '_').collect();
    let mag = u64::from_str_radix(&digits, radix).map_err(|_| invalid())?;
    if neg {
        if mag > i64::MAX as u64 + 1 {
            return Err("out of range".into());
        }
        Ok((mag as i64).wrapping_neg())
    } else {
        i64::try_from(mag).map_err(|_| "out of range".into())
    }
}

fn parse_go_ranged<T: TryFrom<i64>>(s: &str) -> Result<T, String> {
    let v = parse_go_int(s)?;
    T::try_from(v).map_err(|_| {
        format!(
            "out of range for {}",
            std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("the type")
        )
    })
}

fn parse_go_i32(s: &str) -> Result<i32, String> {
    parse_go_ranged(s)
}

pub(crate) fn parse_go_u32(s: &str) -> Result<u32, String> {
    parse_go_ranged(s)
}

fn parse_go_usize(s: &str) -> Result<usize, String> {
    parse_go_ranged(s)
}

pub(crate) fn parse_go_u8(s: &str) -> Result<u8, String> {
    parse_go_ranged(s)
}

fn parse_go_u64(s: &str) -> Result<u64, String> {
    if let Some(rest) = s.strip_prefix('-') {
        if rest.is_empty() {
            return Err("not an integer".into());
        }
        return Err("must not be negative".into());
    }
    // Only values beyond i64 need the unsigned path; they are not realistic for these flags.
    parse_go_ranged(s)
}

/// Go's `strconv.ParseFloat(s, 32)` for the common forms (decimal, exponent, `Inf`, `NaN`).
pub(crate) fn parse_go_f32(s: &str) -> Result<f32, String> {
    s.parse::<f32>().map_err(|_| "not a number".into())
}

fn parse_sharding_mode(s: &str) -> Result<ShardingMode, String> {
    s.parse()
}

/// klog severities: names (any case) or numbers.
fn parse_severity(s: &str) -> Result<u8, String> {
    match s.to_ascii_uppercase().as_str() {
        "INFO" | "0" => Ok(0),
        "WARNING" | "1" => Ok(1),
        "ERROR" | "2" => Ok(2),
        "FATAL" | "3" => Ok(3),
        _ => Err("must be INFO, WARNING, ERROR, FATAL or 0..=3".into()),
    }
}

/// One `--node-selector` entry (clap splits values at commas like Go's StringSlice): split at the
/// first ':' and trimmed like upstream; upstream skips malformed entries silently, we reject them.
fn parse_node_selector(entry: &str) -> Result<(String, String), String> {
    let (k, v) = entry
        .split_once(':')
        .ok_or_else(|| "not key:value".to_owned())?;
    let (k, v) = (k.trim(), v.trim());
    if k.is_empty() || v.is_empty() {
        return Err("needs a non-empty key and value (key:value)".into());
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// `--feature-gates`: `Key=bool` entries separated by commas, checked like component-base's
/// parser (spaces trimmed, empty entries skipped); kept as given.
fn parse_feature_gates(s: &str) -> Result<String, String> {
    for entry in s.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| format!("missing bool value for {entry}"))?;
        if k.trim().is_empty() {
            return Err(format!("missing feature name in {entry:?}"));
        }
        parse_go_bool(v.trim())
            .map_err(|_| format!("invalid value of {}={}, err: not a boolean", k.trim(), v))?;
    }
    Ok(s.to_owned())
}
