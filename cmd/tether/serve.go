package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/openai"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
	"github.com/tetherhq/tether/web/app"
)

type serveConfig struct {
	addr, data, token, keysFile, nodeID, agent, cors, logLevel, logFormat, debugAddr string
	agents                                                                           string
	allowedHosts                                                                     string
	openaiBaseURL, openaiModel, openaiKey                                            string
	storeURL, natsStream                                                             string
	natsReplicas                                                                     int
	fsync, insecure, debugPublic                                                     bool
	heartbeat, lifetime, leaseTTL, cancelGrace, sweep, shutdownGrace, writeTimeout   time.Duration
	longPollTimeout                                                                  time.Duration
	memoryLimit                                                                      int64
	maxBody, maxEvent, maxWSSubs, runConcurrency                                     int
	publicURL                                                                        string
	loopbackWebhooks                                                                 bool
	aguiAgents                                                                       []string
	tokens                                                                           tokenFlags
	limits                                                                           api.Limits
}

func serveCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "serve [flags]", env, stderr)
	var c serveConfig
	fs.StringVar(&c.addr, "addr", fs.envOr("TETHER_ADDR", "127.0.0.1:8080"), "address to listen on ($TETHER_ADDR)")
	fs.StringVar(&c.data, "data", fs.envOr("TETHER_DATA", "./tether-data"), "data directory; the store is tether.db inside ($TETHER_DATA)")
	fs.StringVar(&c.storeURL, "store", fs.envOr("TETHER_STORE", "sqlite"), "where the logs live: sqlite (tether.db in --data) or nats://host:4222[,nats://host2:4222,...] for a NATS JetStream cluster shared by several nodes ($TETHER_STORE)")
	fs.StringVar(&c.natsStream, "nats-stream", fs.envOr("TETHER_NATS_STREAM", "TETHER"), "JetStream stream (and bucket prefix) of the logs, with --store nats://... ($TETHER_NATS_STREAM)")
	natsReplicas := fs.Int("nats-replicas", "TETHER_NATS_REPLICAS", 1, "replicas of the stream and bucket when this node creates them (3 in a 3-server cluster)")
	fsync := fs.Bool("fsync", "TETHER_FSYNC", false, "fsync every commit (group commit): survive power loss, not only a crash")
	fs.SecretVar(&c.token, "token", "TETHER_TOKEN", "admin API token; clients send Authorization: Bearer <token>")
	fs.StringVar(&c.keysFile, "keys", fs.envOr("TETHER_KEYS", ""), "file of API keys, one \"role token [name]\" per line; roles admin, worker, client; read again on SIGHUP, as are the --jwt-* files ($TETHER_KEYS)")
	fs.StringVar(&c.tokens.secretFile, "jwt-secret-file", fs.envOr("TETHER_JWT_SECRET_FILE", ""), "file holding an HMAC secret (at least 32 bytes; trailing whitespace trimmed): accept user tokens (JWTs) signed HS256/HS384/HS512 with it ($TETHER_JWT_SECRET_FILE)")
	pubKeys := &agentList{items: splitList(fs.envOr("TETHER_JWT_PUBLIC_KEYS", ""))}
	fs.Var(pubKeys, "jwt-public-key", "PEM file of a public key (RSA, ECDSA or Ed25519): accept user tokens (JWTs) signed with its private key; repeat for more ($TETHER_JWT_PUBLIC_KEYS, comma-separated)")
	fs.StringVar(&c.tokens.jwksURL, "jwks-url", fs.envOr("TETHER_JWKS_URL", ""), "URL of a JWKS: accept user tokens (JWTs) signed with its keys, picked by kid; fetched again for an unknown kid (at most every 30s) and once 10m old, so keys rotate without a restart ($TETHER_JWKS_URL)")
	fs.StringVar(&c.tokens.issuer, "jwt-issuer", fs.envOr("TETHER_JWT_ISSUER", ""), "if set, the iss every user token must have ($TETHER_JWT_ISSUER)")
	fs.StringVar(&c.tokens.audience, "jwt-audience", fs.envOr("TETHER_JWT_AUDIENCE", ""), "if set, a value every user token's aud must hold ($TETHER_JWT_AUDIENCE)")
	insecure := fs.Bool("insecure", "TETHER_INSECURE", false, "allow listening on a non-loopback address without any API key")
	heartbeat := fs.Duration("heartbeat", "TETHER_HEARTBEAT", 15*time.Second, "interval of ping events on streams")
	lifetime := fs.Duration("max-stream-lifetime", "TETHER_MAX_STREAM_LIFETIME", 10*time.Minute, "streams end after this long; clients resume")
	leaseTTL := fs.Duration("lease-ttl", "TETHER_LEASE_TTL", 30*time.Second, "a run's lease lasts this long without an append or heartbeat")
	cancelGrace := fs.Duration("cancel-grace", "TETHER_CANCEL_GRACE", 10*time.Second, "time a worker has to confirm a cancel before the server ends the run")
	sweep := fs.Duration("sweep-interval", "TETHER_SWEEP_INTERVAL", time.Second, "how often expired leases and cancel graces are checked")
	shutdownGrace := fs.Duration("shutdown-grace", "TETHER_SHUTDOWN_GRACE", 5*time.Second, "on SIGTERM, time in-process runs get to finish before they are aborted")
	writeTimeout := fs.Duration("write-timeout", "TETHER_WRITE_TIMEOUT", 30*time.Second, "a stream whose client reads nothing for this long is cut")
	longPoll := fs.Duration("long-poll-timeout", "TETHER_LONG_POLL_TIMEOUT", 30*time.Second, "how long a Durable Streams long poll (/v1/stream/) waits for data")
	maxBody := fs.Int("max-body", "TETHER_MAX_BODY", 4<<20, "largest request body in bytes (a worker's batch of events)")
	maxEvent := fs.Int("max-event", "TETHER_MAX_EVENT", 1<<20, "largest event in bytes")
	maxWSSubs := fs.Int("max-ws-subscriptions", "TETHER_MAX_WS_SUBSCRIPTIONS", 256, "most subscriptions on one WebSocket")
	runConcurrency := fs.Int("run-concurrency", "TETHER_RUN_CONCURRENCY", runner.DefaultConcurrency, "most in-process runs (demo, openai, --ag-ui-agent) executing at once on this node; later ones stay pending, in line, until one ends")
	memLimit := fs.String("memory-limit", "TETHER_MEMORY_LIMIT", "", "soft limit of the Go runtime's memory, e.g. 512MiB or 2GiB: above it the server collects garbage harder and returns freed memory at once (default: none, or $GOMEMLIMIT)")
	limitThreads := fs.String("limit-threads", "TETHER_LIMIT_THREADS", "100/s", "threads (and Durable Streams) each key may create: N/s, N/m or N/h (up to N at once, N more each second, minute or hour), 0 for no limit; over it, 429 rate_limited with Retry-After. Without keys, per client address, and none for clients on loopback")
	limitRuns := fs.String("limit-runs", "TETHER_LIMIT_RUNS", "100/s", "runs each key may start (every surface): N/s, N/m or N/h, 0 for no limit")
	limitAppends := fs.String("limit-appends", "TETHER_LIMIT_APPENDS", "1000/s", "append requests each key may send (workers' events, Durable Streams data): N/s, N/m or N/h, 0 for no limit")
	limitAppendBytes := fs.String("limit-append-bytes", "TETHER_LIMIT_APPEND_BYTES", "64MiB/s", "bytes of append bodies each key may send: N/s, N/m or N/h with N in bytes or KiB, MiB, GiB, 0 for no limit; at least --max-body at once")
	limitStreams := fs.Int("limit-streams", "TETHER_LIMIT_STREAMS", 1000, "streams (SSE, WebSocket) and long polls each key may hold open at once, 0 for no limit")
	maxBodyInFlight := fs.Int("max-body-in-flight", "TETHER_MAX_BODY_IN_FLIGHT", 0, "request-body bytes handled at once, over every client (0: 2 x --max-body, -1: no cap); a request that does not fit waits up to 5s, then gets 503 unavailable with Retry-After")
	maxBodyPerKey := fs.Int("max-body-in-flight-per-key", "TETHER_MAX_BODY_IN_FLIGHT_PER_KEY", 0, "request-body bytes of --max-body-in-flight each key may hold at once (0: a quarter of it, -1: no cap per key); a key holding none may always send one body. Over it, a request waits up to 5s for the key's own bodies to be answered, then gets 503 unavailable with Retry-After; keys waiting for room are served in turn")
	fs.StringVar(&c.nodeID, "node-id", fs.envOr("TETHER_NODE_ID", "local"), "this node's name, unique among the nodes sharing a store; its in-process runs are aborted when it restarts (with --store nats://..., the host name unless set) ($TETHER_NODE_ID)")
	fs.StringVar(&c.agent, "agent", fs.envOr("TETHER_AGENT", demo.Name), "default agent for runs that name none ($TETHER_AGENT)")
	fs.StringVar(&c.agents, "agents", fs.envOr("TETHER_AGENTS", ""), "comma-separated names of external agents (served by workers) whose runs are accepted before any worker claims; more can be declared with PUT /v1/agents/{name} ($TETHER_AGENTS)")
	fs.StringVar(&c.openaiBaseURL, "openai-base-url", fs.envOr("TETHER_OPENAI_BASE_URL", ""), "OpenAI-compatible API base URL for the openai agent, e.g. "+openai.DefaultBaseURL+" ($TETHER_OPENAI_BASE_URL)")
	fs.StringVar(&c.openaiModel, "openai-model", fs.envOr("TETHER_OPENAI_MODEL", ""), "model for the openai agent (runs may override it in metadata.openai.model) ($TETHER_OPENAI_MODEL)")
	aguiList := &agentList{items: splitList(fs.envOr("TETHER_AG_UI_AGENTS", ""))}
	fs.Var(aguiList, "ag-ui-agent", "an AG-UI agent behind Tether: NAME=URL, runs of agent NAME are POSTed to the AG-UI endpoint URL and what it streams is appended to them; repeat the flag (or separate with commas) for more ($TETHER_AG_UI_AGENTS, comma-separated)")
	fs.StringVar(&c.cors, "cors-origins", fs.envOr("TETHER_CORS_ORIGINS", ""), "comma-separated origins (scheme://host[:port]) whose pages may call the API from a browser, writes included, or * ($TETHER_CORS_ORIGINS)")
	fs.StringVar(&c.logLevel, "log-level", fs.envOr("TETHER_LOG_LEVEL", "info"), "debug, info, warn or error ($TETHER_LOG_LEVEL)")
	fs.StringVar(&c.logFormat, "log-format", fs.envOr("TETHER_LOG_FORMAT", "text"), "text or json ($TETHER_LOG_FORMAT)")
	fs.StringVar(&c.allowedHosts, "allowed-hosts", fs.envOr("TETHER_ALLOWED_HOSTS", ""), "comma-separated Host names accepted besides loopback ones when listening on loopback without keys (e.g. a reverse proxy's on this machine), or * ($TETHER_ALLOWED_HOSTS)")
	fs.StringVar(&c.debugAddr, "debug-addr", fs.envOr("TETHER_DEBUG_ADDR", ""), "if set, serve /debug/pprof on this address: loopback only unless --debug-public; with keys, for the admin token only ($TETHER_DEBUG_ADDR)")
	debugPublic := fs.Bool("debug-public", "TETHER_DEBUG_PUBLIC", false, "allow --debug-addr on a non-loopback address (without keys, --insecure too)")
	fs.StringVar(&c.publicURL, "public-url", fs.envOr("TETHER_PUBLIC_URL", ""), "this server's URL as clients and webhook receivers reach it, e.g. https://tether.example.com: Durable Streams Location headers and webhook callback URLs are built from it (default: http:// and the address listened on, unless that is 0.0.0.0 or ::) ($TETHER_PUBLIC_URL)")
	loopbackWebhooks := fs.Bool("allow-loopback-webhooks", "TETHER_ALLOW_LOOPBACK_WEBHOOKS", false, "let Durable Streams webhook subscriptions call this machine (localhost, 127.x.x.x, ::1); for development only")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tether serve: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	c.fsync, c.insecure, c.natsReplicas, c.debugPublic = *fsync, *insecure, *natsReplicas, *debugPublic
	c.heartbeat, c.lifetime, c.leaseTTL, c.cancelGrace, c.sweep = *heartbeat, *lifetime, *leaseTTL, *cancelGrace, *sweep
	c.shutdownGrace, c.writeTimeout, c.maxBody, c.maxEvent, c.maxWSSubs = *shutdownGrace, *writeTimeout, *maxBody, *maxEvent, *maxWSSubs
	c.longPollTimeout = *longPoll
	c.runConcurrency = *runConcurrency
	if *memLimit != "" {
		n, err := parseBytes(*memLimit)
		if err != nil || n <= 0 {
			fmt.Fprintf(stderr, "tether serve: --memory-limit ($TETHER_MEMORY_LIMIT) must be a size such as 512MiB or 2GiB, not %q\n", *memLimit)
			return errUsage
		}
		c.memoryLimit = n
	}
	if err := checkServeValues(c, *maxBodyInFlight, *maxBodyPerKey); err != nil {
		fmt.Fprintf(stderr, "tether serve: %v\n", err)
		return errUsage
	}
	// The log's, the token's and the public URL's values are checked here
	// too, so that every value a flag cannot mean is a usage error (exit 2).
	if _, err := newLogger(c.logLevel, c.logFormat, io.Discard); err != nil {
		fmt.Fprintf(stderr, "tether serve: %v\n", err)
		return errUsage
	}
	if c.token != "" {
		if err := checkToken(c.token); err != nil {
			fmt.Fprintf(stderr, "tether serve: %v\n", err)
			return errUsage
		}
	}
	if c.publicURL != "" {
		if _, err := publicURL(c.publicURL, nil); err != nil {
			fmt.Fprintf(stderr, "tether serve: %v\n", err)
			return errUsage
		}
	}
	for _, l := range []struct {
		flag, val string
		to        *api.Rate
	}{{"limit-threads", *limitThreads, &c.limits.Threads}, {"limit-runs", *limitRuns, &c.limits.Runs},
		{"limit-appends", *limitAppends, &c.limits.Appends}, {"limit-append-bytes", *limitAppendBytes, &c.limits.AppendBytes}} {
		r, err := api.ParseRate(l.val)
		if err != nil {
			fmt.Fprintf(stderr, "tether serve: --%s: %v\n", l.flag, err)
			return errUsage
		}
		*l.to = r
	}
	if *limitStreams < 0 {
		fmt.Fprintf(stderr, "tether serve: --limit-streams must not be negative\n")
		return errUsage
	}
	c.limits.Streams = *limitStreams
	c.limits.BodyBytes = int64(*maxBodyInFlight)
	c.limits.BodyBytesPerPrincipal = int64(*maxBodyPerKey)
	c.loopbackWebhooks = *loopbackWebhooks
	c.aguiAgents = aguiList.items
	c.tokens.publicKeys = pubKeys.items
	// The key comes only from the environment, so that it never shows in
	// the process list.
	c.openaiKey = env("OPENAI_API_KEY")
	return serve(ctx, c, stderr)
}

// checkServeValues refuses the durations, sizes and counts a flag (or its
// environment twin) cannot mean: below them the server's options would
// take their defaults in silence, or, for --shutdown-grace, abort every
// run at once.
func checkServeValues(c serveConfig, maxBodyInFlight, maxBodyPerKey int) error {
	for _, d := range []struct {
		flag, env string
		v         time.Duration
	}{{"heartbeat", "TETHER_HEARTBEAT", c.heartbeat}, {"max-stream-lifetime", "TETHER_MAX_STREAM_LIFETIME", c.lifetime},
		{"lease-ttl", "TETHER_LEASE_TTL", c.leaseTTL}, {"cancel-grace", "TETHER_CANCEL_GRACE", c.cancelGrace},
		{"sweep-interval", "TETHER_SWEEP_INTERVAL", c.sweep}, {"write-timeout", "TETHER_WRITE_TIMEOUT", c.writeTimeout},
		{"long-poll-timeout", "TETHER_LONG_POLL_TIMEOUT", c.longPollTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s ($%s) must be a duration above 0, such as 15s, not %s", d.flag, d.env, d.v)
		}
	}
	if c.shutdownGrace < 0 {
		return fmt.Errorf("--shutdown-grace ($TETHER_SHUTDOWN_GRACE) must not be negative, not %s", c.shutdownGrace)
	}
	for _, n := range []struct {
		flag, env string
		v         int
	}{{"max-body", "TETHER_MAX_BODY", c.maxBody}, {"max-event", "TETHER_MAX_EVENT", c.maxEvent},
		{"max-ws-subscriptions", "TETHER_MAX_WS_SUBSCRIPTIONS", c.maxWSSubs}, {"run-concurrency", "TETHER_RUN_CONCURRENCY", c.runConcurrency}} {
		if n.v <= 0 {
			return fmt.Errorf("--%s ($%s) must be at least 1, not %d", n.flag, n.env, n.v)
		}
	}
	if c.natsReplicas < 1 || c.natsReplicas > 5 {
		return fmt.Errorf("--nats-replicas ($TETHER_NATS_REPLICAS) must be 1 to 5, not %d", c.natsReplicas)
	}
	if maxBodyInFlight < -1 {
		return fmt.Errorf("--max-body-in-flight ($TETHER_MAX_BODY_IN_FLIGHT) must be a number of bytes, 0 (2 x --max-body) or -1 (no cap), not %d", maxBodyInFlight)
	}
	if maxBodyPerKey < -1 {
		return fmt.Errorf("--max-body-in-flight-per-key ($TETHER_MAX_BODY_IN_FLIGHT_PER_KEY) must be a number of bytes, 0 (a quarter of --max-body-in-flight) or -1 (no cap per key), not %d", maxBodyPerKey)
	}
	return nil
}

func serve(ctx context.Context, c serveConfig, stderr io.Writer) error {
	// A server whose log goes into a pipe (a log shipper) must outlive the
	// pipe's reader: by default, Go dies of SIGPIPE at the next write to a
	// closed pipe on stdout or stderr. Ignored, such a write fails (the line
	// is lost) and serving goes on.
	signal.Ignore(syscall.SIGPIPE)
	// SIGHUP reads the keys again (reload.go), once serving; it no longer
	// ends the server, as Go's default would, without the shutdown below.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log, err := newLogger(c.logLevel, c.logFormat, stderr)
	if err != nil {
		return err
	}
	if c.memoryLimit > 0 {
		debug.SetMemoryLimit(c.memoryLimit)
	}

	keys, err := loadKeys(c)
	if err != nil {
		return err
	}
	tokens, err := loadTokens(c.tokens)
	if err != nil {
		return err
	}
	// Any key, static or for signed tokens, turns auth on.
	authOn := len(keys) > 0 || tokens.Enabled()
	ln, err := net.Listen("tcp", c.addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		// The first thing a second "bash scripts/serve" meets: say what to do.
		return fmt.Errorf("listen on %s: the address is in use (another tether serve?): stop what holds it, or choose another address with --addr, e.g. --addr 127.0.0.1:9000", c.addr)
	}
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	if !authOn && !isLoopback(ln.Addr()) && !c.insecure {
		return fmt.Errorf("refusing to listen on %s without API keys: set --token, --keys or a JWT key, or pass --insecure", c.addr)
	}
	origins := splitList(c.cors)
	if err := api.CheckOrigins(origins); err != nil {
		return fmt.Errorf("--cors-origins: %w", err)
	}
	var debugLn net.Listener
	if c.debugAddr != "" {
		if debugLn, err = listenDebug(c.debugAddr, c.debugPublic, authOn || c.insecure); err != nil {
			return err
		}
		defer debugLn.Close()
	}
	public, err := publicURL(c.publicURL, ln.Addr())
	if err != nil {
		return err
	}
	if public == "" {
		log.Warn("no --public-url, and the address listened on names no host: Durable Streams Location headers are paths, and webhook subscriptions are refused", "addr", ln.Addr().String())
	}

	// 0o750, as the store makes its own: the logs hold conversations.
	if err := os.MkdirAll(c.data, 0o750); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	st, err := openStore(ctx, &c, log)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	local, err := localAgents(c, log)
	if err != nil {
		return err
	}
	declared := splitList(c.agents)
	for _, n := range declared {
		if len(n) > 255 {
			return fmt.Errorf("--agents: %q is over 255 bytes", n[:32]+"…")
		}
	}
	if _, ok := local[c.agent]; !ok && !slices.Contains(declared, c.agent) {
		log.Warn("the default agent is not an in-process agent: runs that name no agent wait for a worker that asks for it",
			"agent", c.agent, "in_process", strings.Join(slices.Sorted(maps.Keys(local)), ","))
	}
	e := engine.New(st, engine.Options{
		NodeID: c.nodeID, LeaseTTL: c.leaseTTL, SweepInterval: c.sweep, CancelGrace: c.cancelGrace,
		MaxEventBytes: c.maxEvent, Logger: log,
		AcceptAgent: func(name string) bool { _, ok := local[name]; return ok },
		InProcess:   slices.Sorted(maps.Keys(local)), Declared: declared,
	})
	defer e.Close()
	if err := e.Start(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	rn := runner.New(e, local, runner.Options{Concurrency: c.runConcurrency, Logger: log})
	tctx, stopTrim := context.WithCancel(context.Background())
	defer stopTrim()
	go trimMemory(tctx, log, c.heartbeat, func() int { return e.Hub().DropIdle() + e.DropIdle() })

	// Durable Streams live in the same store as thread logs; their commits
	// reach the engine's hub like every other. Subscriptions hear of
	// appends and deletions through OnAppend and OnDelete, which never
	// block.
	signing, err := loadSigningKey(filepath.Join(c.data, "webhook-signing.key"))
	if err != nil {
		return err
	}
	var wk *wake.Manager
	// On NATS other nodes may share the store: streams check what they
	// cached against it.
	_, shared := st.(*natsstore.Store)
	ds := streams.New(st, e.Hub(), streams.Options{Logger: log, Shared: shared,
		OnAppend: func(path string) { wk.Notify(path) }, OnDelete: func(path string) { wk.Deleted(path) }})
	wk = wake.New(ds, st, wake.Options{SigningKey: signing, BaseURL: public, AllowLoopback: c.loopbackWebhooks, Logger: log})
	if err := ds.Start(ctx); err != nil {
		return fmt.Errorf("start streams: %w", err)
	}
	defer ds.Close()
	if err := wk.Start(ctx); err != nil {
		return fmt.Errorf("start stream subscriptions: %w", err)
	}
	defer wk.Close()

	srv := api.New(e, api.Options{
		Keys: keys, Tokens: tokens, CORSOrigins: origins, DefaultAgent: c.agent, Heartbeat: c.heartbeat,
		// Without keys on loopback, answer only to loopback names: a page
		// whose name was rebound to 127.0.0.1 must not use the server
		// through its visitor's browser (docs/operations.md, "Security").
		LoopbackHosts: !authOn && isLoopback(ln.Addr()), AllowedHosts: splitList(c.allowedHosts),
		MaxStreamLifetime: c.lifetime, WriteTimeout: c.writeTimeout, MaxBodyBytes: int64(c.maxBody), MaxSubscriptions: c.maxWSSubs,
		Limits:  c.limits,
		Streams: ds, Wake: wk, LongPollTimeout: c.longPollTimeout, PublicURL: public,
		Web: app.FS(), Logger: log,
	})
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	cs := newConns()
	cs.serve(hs)
	if debugLn != nil {
		ds := debugServer(srv.Admin(debugHandler()), log)
		go func() {
			if err := ds.Serve(debugLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("debug server", "err", err)
			}
		}()
		defer ds.Close()
		log.Info("debug server", "url", "http://"+debugLn.Addr().String()+"/debug/pprof/")
	}

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	rn.Start()
	auth := "off (loopback)"
	if authOn {
		auth = fmt.Sprintf("%d key(s)", len(keys))
		if tokens.Enabled() {
			auth += ", signed user tokens"
		}
	}
	log.Info("tether is serving", "url", "http://"+ln.Addr().String(), "data", c.data, "fsync", c.fsync,
		"auth", auth, "agents", strings.Join(rn.Names(), ","), "run_concurrency", c.runConcurrency, "version", versionString())

serving:
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-hup:
			reloadAuth(c, authOn, srv, log)
		case <-ctx.Done():
			break serving
		}
	}

	// Shutdown, in an order that loses nothing and never hangs on a
	// stream: stop taking connections; let in-process runs finish within
	// the grace (their clients still see them), abort the rest; tell every
	// stream to reconnect; wait for requests; flush the store.
	log.Info("shutting down", "grace", c.shutdownGrace)
	srv.SetReady(false)
	hctx, hcancel := context.WithTimeout(context.Background(), c.shutdownGrace+c.writeTimeout+10*time.Second)
	defer hcancel()
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Shutdown(hctx) }()
	gctx, gcancel := context.WithTimeout(context.Background(), c.shutdownGrace)
	if err := rn.Shutdown(gctx); err != nil {
		log.Error("abort in-process runs", "err", err)
	}
	gcancel()
	// Every stream is told to reconnect and ends. One whose client reads
	// nothing cannot take that frame: its write blocks until
	// --write-timeout (30 s), and waiting for it would hold the exit (and
	// every other step of it) that long. After streamDrain such streams
	// are left to the exit, which closes their connections; they hold
	// nothing unwritten, and their clients resume from their last id.
	streamsDone := make(chan struct{})
	go func() { srv.Shutdown(); close(streamsDone) }()
	select {
	case <-streamsDone:
	case <-time.After(streamDrain):
		log.Warn("streams whose clients read nothing are cut at exit", "waited", streamDrain)
	}
	// Streams and long polls are done; what may remain are requests in
	// flight (an append on a slow link), which get until hctx, and what
	// shutdown does not wait for (see conns): connections that never sent
	// a request, streams whose client reads nothing. Those are closed.
	select {
	case err := <-httpDone:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("http shutdown", "err", err)
		}
	case <-time.After(time.Second):
		cs.closeUnwaited()
		if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("requests still in flight are cut", "err", err)
			hs.Close()
		}
	}
	_ = wk.Close()
	_ = ds.Close()
	if err := e.Close(); err != nil {
		log.Error("close engine", "err", err)
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	log.Info("stopped")
	return nil
}

// streamDrain is how long shutdown waits for the streams to take their
// reconnect frame and end: a client that reads at all does in
// milliseconds.
const streamDrain = 2 * time.Second

// localAgents returns the in-process agents: demo always, openai when it
// is the default agent or configured, and each --ag-ui-agent.
func localAgents(c serveConfig, log *slog.Logger) (map[string]agents.Agent, error) {
	local := map[string]agents.Agent{demo.Name: demo.New()}
	if c.agent == openai.Name || c.openaiBaseURL != "" || c.openaiModel != "" {
		base := c.openaiBaseURL
		if base == "" {
			base = openai.DefaultBaseURL
		}
		a, err := openai.New(openai.Options{BaseURL: base, Model: c.openaiModel, APIKey: c.openaiKey, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("openai agent: %w", err)
		}
		local[openai.Name] = a
	}
	proxies, err := aguiAgents(c.aguiAgents, log, demo.Name, openai.Name)
	if err != nil {
		return nil, err
	}
	for name, a := range proxies {
		local[name] = a
	}
	return local, nil
}

// openStore opens the store --store names. With NATS, the node needs a
// name of its own that stays the same across restarts (its in-process runs
// are aborted when it restarts): the host name unless --node-id says.
func openStore(ctx context.Context, c *serveConfig, log *slog.Logger) (store.Store, error) {
	switch {
	case c.storeURL == "sqlite" || c.storeURL == "":
		return sqlitestore.Open(filepath.Join(c.data, "tether.db"), sqlitestore.Options{Fsync: c.fsync, Logger: log})
	case strings.HasPrefix(c.storeURL, "nats://") || strings.HasPrefix(c.storeURL, "tls://"):
		if c.nodeID == "local" {
			host, err := os.Hostname()
			if err != nil || host == "" {
				return nil, errors.New("with --store nats://..., set --node-id to a name unique to this node")
			}
			c.nodeID = host
		}
		if c.fsync {
			log.Warn("--fsync applies to the sqlite store; JetStream's durability is its own (use R3, or sync_interval: always)")
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := natsstore.Open(octx, natsstore.Options{URL: c.storeURL, Stream: c.natsStream, Replicas: c.natsReplicas, Node: c.nodeID, Logger: log})
		if err != nil {
			return nil, err
		}
		log.Info("store: NATS JetStream", "url", redactURL(c.storeURL), "stream", c.natsStream, "replicas", c.natsReplicas, "node", c.nodeID)
		return st, nil
	}
	return nil, fmt.Errorf("--store must be sqlite or nats://host:port[,...], got %q", redactURL(c.storeURL))
}

// redactURL hides the passwords of URLs (user:password@host) for logs.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(p); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
				parts[i] = u.String()
			}
		}
	}
	return strings.Join(parts, ",")
}

// checkToken refuses a --token no client could use. It never quotes the
// token.
func checkToken(token string) error {
	if len(token) < 16 {
		return errors.New("--token ($TETHER_TOKEN) must be at least 16 characters")
	}
	if strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		// No client can send it (header values lose their outer
		// spaces and may not hold control characters): every request
		// would be refused. Often a CR from an env file.
		return errors.New("--token ($TETHER_TOKEN) must not hold spaces or control characters (a CR from an env file?)")
	}
	return nil
}

func loadKeys(c serveConfig) ([]api.Key, error) {
	var keys []api.Key
	if c.token != "" {
		if err := checkToken(c.token); err != nil {
			return nil, err
		}
		keys = append(keys, api.Key{Token: c.token, Role: api.RoleAdmin, Name: "token"})
	}
	if c.keysFile != "" {
		f, err := os.Open(c.keysFile)
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		defer f.Close()
		more, err := api.ParseKeys(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.keysFile, err)
		}
		if len(more) == 0 {
			// An empty file (a secret not mounted yet, a template) would
			// leave a server that was asked for keys without any: on
			// loopback, with no auth at all.
			return nil, fmt.Errorf("%s: the keys file holds no key (want \"role token [name]\" lines)", c.keysFile)
		}
		for _, k := range more {
			if k.Token == c.token {
				return nil, fmt.Errorf("%s: key %s has the token given by --token", c.keysFile, k.Name)
			}
		}
		keys = append(keys, more...)
	}
	return keys, nil
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level must be debug, info, warn or error")
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json")
}
