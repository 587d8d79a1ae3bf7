# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_notevault_global_optspecs
    string join \n h/help V/version
end

function __fish_notevault_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_notevault_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_notevault_using_subcommand
    set -l cmd (__fish_notevault_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c notevault -n "__fish_notevault_needs_command" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_needs_command" -s V -l version -d 'Print version'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "serve" -d 'Serve a vault over HTTP (the /v1 API and /mcp), or HTTPS with --tls-cert and --tls-key'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "reindex" -d 'Rebuild the search index of a vault from its folder (the daemon must be stopped)'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "openapi" -d 'Print the OpenAPI 3.1 contract as JSON'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "token" -d 'Create, list and revoke personal access tokens (kept hashed in the state directory; a running daemon sees a change at once)'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "login-link" -d 'Print a one-time sign-in link to the web console of the daemon serving a vault (valid 15 minutes, for one sign-in)'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "export" -d 'Write a .tar.gz of the vault\'s notes and attachments, byte for byte (optionally with the history), the same archive as POST /v1/export; the daemon may be running'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "check" -d 'Verify the state directory against the folder: catalog, metadata ids, search index, history (git fsck), leftover temp files; exit 3 on a problem (the daemon must be stopped)'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "status" -d 'Ask the daemon serving a vault how it is: seq, index freshness, watcher, history backlog, pending writes; with no daemon serving it, what the folder holds'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "search" -d 'Search a vault\'s notes (the daemon serving it, or the folder read directly): the best matches, each with its slug, title and the line that matched'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "read" -d 'Print a note\'s text as in its file (the daemon serving the vault, or the folder read directly), or lines A to B of it with --lines'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "ls" -d 'List a vault\'s notes (the daemon serving it, or the folder read directly): slug and title, optionally under a path prefix'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish or powershell) on stdout'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "device" -d 'The reference device client: keep a folder in step with a daemon over the sync plane; private notes are encrypted on the device and never leave it in plaintext'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "db" -d 'Hosted mode\'s PostgreSQL database: bring its schema up to this notevault\'s'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "vault" -d 'Hosted mode\'s vaults in PostgreSQL: create, list and delete them'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "import" -d 'Bring a folder vault into a hosted vault, with its history: every revision, its actor and time, and the notes as they are now'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "mcp" -d 'Serve MCP over stdio (for clients that launch a command): through the daemon serving the vault when one answers, else from the vault itself'
complete -c notevault -n "__fish_notevault_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l listen -d 'Address to listen on [default: 127.0.0.1:4000]' -r
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l tls-cert -d 'Serve HTTPS with this PEM certificate chain (also NOTEVAULT_TLS_CERT); needs --tls-key' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l tls-key -d 'The PEM private key of --tls-cert: PKCS#8, RSA or EC, unencrypted (also NOTEVAULT_TLS_KEY)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l database -d 'Hosted mode: serve the vaults of this PostgreSQL database (no folder; also NOTEVAULT_DATABASE_URL or `database_url` in the config file)' -r
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l metrics-listen -d 'Serve GET /metrics (Prometheus text, no credential) on this second address too, for a scraper on a private network; hosted mode serves it there only (also NOTEVAULT_METRICS_LISTEN or `metrics_listen` in the config file)' -r
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l blob-store -d 'Hosted mode: keep attachment bytes in this object store, s3://BUCKET[/PREFIX] (also NOTEVAULT_BLOB_STORE or `blob_store`; credentials and endpoint from the standard AWS_* environment)' -r
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l blob-public-endpoint -d 'Hosted mode: where clients reach the blob store, http(s)://HOST[:PORT]; presigned links are then the store\'s own, so attachment bytes skip the instance (also NOTEVAULT_BLOB_PUBLIC_ENDPOINT or `blob_public_endpoint`)' -r
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l log-format -d 'Logs on stderr: text for a person, or json (one object per line, with one line per request: id, vault, route, status, latency) for a log shipper (also NOTEVAULT_LOG_FORMAT)' -r -f -a "text\t''
json\t''"
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l insecure-open -d 'Serve a non-loopback address without authentication and TLS (accept the risk)'
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l no-watch -d 'Do not watch the folder (external edits are then seen when a note is read)'
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l review -d 'Queue every agent write for review, and take review decisions only from a person signed in to the console or a notes.review token (kept in the vault\'s settings)'
complete -c notevault -n "__fish_notevault_using_subcommand serve" -l migrate -d 'Hosted mode: apply the database\'s schema migrations before serving'
complete -c notevault -n "__fish_notevault_using_subcommand serve" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand reindex" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand reindex" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand reindex" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand openapi" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "create" -d 'Create a token and print it, alone, on stdout (it is shown this once)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "list" -d 'List the tokens: name, prefix, scopes, created, expires, last used (never a token)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "revoke" -d 'Revoke a token by its name or its prefix (`nvp_` and 8 characters)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -l name -d 'A name for the token, unique in this vault (who or what uses it)' -r
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -l scope -d 'A permission beyond reading (repeat for both)' -r -f -a "notes.write\t''
notes.review\t''"
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -l expires-in -d 'Lifetime: a number and s, m, h, d or w (30d) [default: no expiry]' -r
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -l database -d 'Hosted mode: the PostgreSQL database holding the vault' -r
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from list" -l database -d 'Hosted mode: the PostgreSQL database holding the vault' -r
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from list" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from list" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from revoke" -l database -d 'Hosted mode: the PostgreSQL database holding the vault' -r
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from revoke" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from revoke" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from revoke" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "create" -d 'Create a token and print it, alone, on stdout (it is shown this once)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the tokens: name, prefix, scopes, created, expires, last used (never a token)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Revoke a token by its name or its prefix (`nvp_` and 8 characters)'
complete -c notevault -n "__fish_notevault_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand login-link" -l database -d 'Hosted mode: the PostgreSQL database holding the vault' -r
complete -c notevault -n "__fish_notevault_using_subcommand login-link" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand login-link" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand login-link" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand export" -l vault -d 'A hosted vault to export instead of a folder, by name or id (with --database)' -r
complete -c notevault -n "__fish_notevault_using_subcommand export" -l database -d 'The hosted vault\'s database, postgres://… (also NOTEVAULT_DATABASE_URL)' -r
complete -c notevault -n "__fish_notevault_using_subcommand export" -s o -l output -d 'The archive to write (.tar.gz); refused if it exists, unless --force' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand export" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand export" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand export" -l history -d 'Add the history: a git bundle of history.git (history.bundle)'
complete -c notevault -n "__fish_notevault_using_subcommand export" -l force -d 'Replace FILE if it exists'
complete -c notevault -n "__fish_notevault_using_subcommand export" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand check" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand check" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand check" -l repair -d 'Rebuild what is derived (search index, catalog rows) and remove leftover temp files'
complete -c notevault -n "__fish_notevault_using_subcommand check" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand status" -l url -d 'Ask the daemon at this base URL instead of the one the vault\'s state directory names' -r
complete -c notevault -n "__fish_notevault_using_subcommand status" -l token -d 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)' -r
complete -c notevault -n "__fish_notevault_using_subcommand status" -l cacert -d 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand status" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand status" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand status" -l json -d 'Print the answers as JSON (those of the /v1 API) instead of a summary'
complete -c notevault -n "__fish_notevault_using_subcommand status" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand search" -s n -l limit -d 'Results to show, 1..100' -r
complete -c notevault -n "__fish_notevault_using_subcommand search" -l url -d 'Ask the daemon at this base URL instead of the one the vault\'s state directory names' -r
complete -c notevault -n "__fish_notevault_using_subcommand search" -l token -d 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)' -r
complete -c notevault -n "__fish_notevault_using_subcommand search" -l cacert -d 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand search" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand search" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand search" -l json -d 'Print the answers as JSON (those of the /v1 API) instead of a summary'
complete -c notevault -n "__fish_notevault_using_subcommand search" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand read" -l lines -d 'Only lines A to B (1-based, both included; A: to the end, :B from the start)' -r
complete -c notevault -n "__fish_notevault_using_subcommand read" -l url -d 'Ask the daemon at this base URL instead of the one the vault\'s state directory names' -r
complete -c notevault -n "__fish_notevault_using_subcommand read" -l token -d 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)' -r
complete -c notevault -n "__fish_notevault_using_subcommand read" -l cacert -d 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand read" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand read" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand read" -l json -d 'Print the answers as JSON (those of the /v1 API) instead of a summary'
complete -c notevault -n "__fish_notevault_using_subcommand read" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l prefix -d 'Only notes whose slug starts with this, e.g. projects/ (a folder) or daily/2026-' -r
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l url -d 'Ask the daemon at this base URL instead of the one the vault\'s state directory names' -r
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l token -d 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)' -r
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l cacert -d 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand ls" -l json -d 'Print the answers as JSON (those of the /v1 API) instead of a summary'
complete -c notevault -n "__fish_notevault_using_subcommand ls" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand completions" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -f -a "init" -d 'Make a folder a device of a daemon; with a passphrase, turn private notes on (the first device) or unlock them; then pull'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -f -a "pull" -d 'Apply the daemon\'s changes to the folder (the snapshot first, and again after compaction; then the ops after the device\'s seq)'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -f -a "push" -d 'Push the folder\'s changes (private notes `*.private.md` encrypted), then pull; an edit whose base moved is kept as a conflicted copy'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -f -a "passphrase" -d 'Wrap the data key under a new passphrase (unwrapped with the current passphrase or the recovery key)'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -f -a "rotate-key" -d 'Make a new data key (keyVersion + 1), seal every private note again under it and push it, then drop the old key; interrupted, both keys stay and running it again finishes'
complete -c notevault -n "__fish_notevault_using_subcommand device; and not __fish_seen_subcommand_from init pull push passphrase rotate-key help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from init" -l token -d 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from init" -l passphrase -d 'The passphrase of private notes (prefer the environment variable)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from init" -l server -d 'The daemon\'s base URL' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from init" -l device-id -d 'This device\'s id (1..100 characters; its pushes carry `device:<ID>`)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from init" -l recovery -d 'Also make a recovery key (printed once on stdout) when turning private notes on'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from init" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from pull" -l token -d 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from pull" -l passphrase -d 'The passphrase of private notes (prefer the environment variable)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from pull" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from push" -l token -d 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from push" -l passphrase -d 'The passphrase of private notes (prefer the environment variable)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from push" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from passphrase" -l token -d 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from passphrase" -l passphrase -d 'The passphrase of private notes (prefer the environment variable)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from passphrase" -l new-passphrase -d 'The new passphrase' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from passphrase" -l recovery-key -d 'Unwrap with the recovery key instead of the current passphrase' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from passphrase" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from rotate-key" -l token -d 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from rotate-key" -l passphrase -d 'The passphrase of private notes (prefer the environment variable)' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from rotate-key" -l recovery-key -d 'The recovery key, when the vault has one: it is renewed to open the new data key' -r
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from rotate-key" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "init" -d 'Make a folder a device of a daemon; with a passphrase, turn private notes on (the first device) or unlock them; then pull'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "pull" -d 'Apply the daemon\'s changes to the folder (the snapshot first, and again after compaction; then the ops after the device\'s seq)'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "push" -d 'Push the folder\'s changes (private notes `*.private.md` encrypted), then pull; an edit whose base moved is kept as a conflicted copy'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "passphrase" -d 'Wrap the data key under a new passphrase (unwrapped with the current passphrase or the recovery key)'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "rotate-key" -d 'Make a new data key (keyVersion + 1), seal every private note again under it and push it, then drop the old key; interrupted, both keys stay and running it again finishes'
complete -c notevault -n "__fish_notevault_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand db; and not __fish_seen_subcommand_from migrate help" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand db; and not __fish_seen_subcommand_from migrate help" -f -a "migrate" -d 'Apply the schema migrations this notevault embeds (each once; a database with a newer schema is refused untouched)'
complete -c notevault -n "__fish_notevault_using_subcommand db; and not __fish_seen_subcommand_from migrate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand db; and __fish_seen_subcommand_from migrate" -l database -d 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)' -r
complete -c notevault -n "__fish_notevault_using_subcommand db; and __fish_seen_subcommand_from migrate" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand db; and __fish_seen_subcommand_from migrate" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand db; and __fish_seen_subcommand_from help" -f -a "migrate" -d 'Apply the schema migrations this notevault embeds (each once; a database with a newer schema is refused untouched)'
complete -c notevault -n "__fish_notevault_using_subcommand db; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and not __fish_seen_subcommand_from create list delete help" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and not __fish_seen_subcommand_from create list delete help" -f -a "create" -d 'Create a vault and print its id, alone, on stdout'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and not __fish_seen_subcommand_from create list delete help" -f -a "list" -d 'List the vaults: id, name, org, created, state'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and not __fish_seen_subcommand_from create list delete help" -f -a "delete" -d 'Delete a vault and every row of it (notes, revisions, op log, tokens, sessions, audit events, settings, keys): it is served no more, at once'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and not __fish_seen_subcommand_from create list delete help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from create" -l org -d 'The organization whose identity-provider tokens (`org_id` claim) select it' -r
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from create" -l database -d 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)' -r
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from create" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from list" -l database -d 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)' -r
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from list" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from list" -l json -d 'Print a JSON array instead of a table'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from delete" -l database -d 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)' -r
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from delete" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from help" -f -a "create" -d 'Create a vault and print its id, alone, on stdout'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the vaults: id, name, org, created, state'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete a vault and every row of it (notes, revisions, op log, tokens, sessions, audit events, settings, keys): it is served no more, at once'
complete -c notevault -n "__fish_notevault_using_subcommand vault; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand import" -l vault -d 'The hosted vault to fill, by name or id (made with `notevault vault create`; it must hold no note yet)' -r
complete -c notevault -n "__fish_notevault_using_subcommand import" -l state-dir -d 'The folder\'s state directory [default: <FOLDER>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand import" -l database -d 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)' -r
complete -c notevault -n "__fish_notevault_using_subcommand import" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand import" -l skip-attachments -d 'Bring the notes in without the folder\'s attachments and private notes (else a blob store is needed when it has any: NOTEVAULT_BLOB_STORE or `blob_store`, with the AWS_* settings)'
complete -c notevault -n "__fish_notevault_using_subcommand import" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -l token -d 'A bearer token: the write tools need one holding notes.write (also NOTEVAULT_TOKEN)' -r
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -l url -d 'The daemon\'s base URL [default: the one serving the vault, if any]' -r
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -l cacert -d 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -l state-dir -d 'Where history, metadata and index live [default: <VAULT>/.notevault]' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -l config -d 'A TOML config file (also NOTEVAULT_CONFIG)' -r -F
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -l no-daemon -d 'Serve from the vault itself, even when a daemon serves it'
complete -c notevault -n "__fish_notevault_using_subcommand mcp" -s h -l help -d 'Print help'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "serve" -d 'Serve a vault over HTTP (the /v1 API and /mcp), or HTTPS with --tls-cert and --tls-key'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "reindex" -d 'Rebuild the search index of a vault from its folder (the daemon must be stopped)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "openapi" -d 'Print the OpenAPI 3.1 contract as JSON'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "token" -d 'Create, list and revoke personal access tokens (kept hashed in the state directory; a running daemon sees a change at once)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "login-link" -d 'Print a one-time sign-in link to the web console of the daemon serving a vault (valid 15 minutes, for one sign-in)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "export" -d 'Write a .tar.gz of the vault\'s notes and attachments, byte for byte (optionally with the history), the same archive as POST /v1/export; the daemon may be running'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "check" -d 'Verify the state directory against the folder: catalog, metadata ids, search index, history (git fsck), leftover temp files; exit 3 on a problem (the daemon must be stopped)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "status" -d 'Ask the daemon serving a vault how it is: seq, index freshness, watcher, history backlog, pending writes; with no daemon serving it, what the folder holds'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "search" -d 'Search a vault\'s notes (the daemon serving it, or the folder read directly): the best matches, each with its slug, title and the line that matched'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "read" -d 'Print a note\'s text as in its file (the daemon serving the vault, or the folder read directly), or lines A to B of it with --lines'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "ls" -d 'List a vault\'s notes (the daemon serving it, or the folder read directly): slug and title, optionally under a path prefix'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish or powershell) on stdout'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "device" -d 'The reference device client: keep a folder in step with a daemon over the sync plane; private notes are encrypted on the device and never leave it in plaintext'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "db" -d 'Hosted mode\'s PostgreSQL database: bring its schema up to this notevault\'s'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "vault" -d 'Hosted mode\'s vaults in PostgreSQL: create, list and delete them'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "import" -d 'Bring a folder vault into a hosted vault, with its history: every revision, its actor and time, and the notes as they are now'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "mcp" -d 'Serve MCP over stdio (for clients that launch a command): through the daemon serving the vault when one answers, else from the vault itself'
complete -c notevault -n "__fish_notevault_using_subcommand help; and not __fish_seen_subcommand_from serve reindex openapi token login-link export check status search read ls completions device db vault import mcp help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from token" -f -a "create" -d 'Create a token and print it, alone, on stdout (it is shown this once)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from token" -f -a "list" -d 'List the tokens: name, prefix, scopes, created, expires, last used (never a token)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from token" -f -a "revoke" -d 'Revoke a token by its name or its prefix (`nvp_` and 8 characters)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "init" -d 'Make a folder a device of a daemon; with a passphrase, turn private notes on (the first device) or unlock them; then pull'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "pull" -d 'Apply the daemon\'s changes to the folder (the snapshot first, and again after compaction; then the ops after the device\'s seq)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "push" -d 'Push the folder\'s changes (private notes `*.private.md` encrypted), then pull; an edit whose base moved is kept as a conflicted copy'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "passphrase" -d 'Wrap the data key under a new passphrase (unwrapped with the current passphrase or the recovery key)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "rotate-key" -d 'Make a new data key (keyVersion + 1), seal every private note again under it and push it, then drop the old key; interrupted, both keys stay and running it again finishes'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from db" -f -a "migrate" -d 'Apply the schema migrations this notevault embeds (each once; a database with a newer schema is refused untouched)'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from vault" -f -a "create" -d 'Create a vault and print its id, alone, on stdout'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from vault" -f -a "list" -d 'List the vaults: id, name, org, created, state'
complete -c notevault -n "__fish_notevault_using_subcommand help; and __fish_seen_subcommand_from vault" -f -a "delete" -d 'Delete a vault and every row of it (notes, revisions, op log, tokens, sessions, audit events, settings, keys): it is served no more, at once'
