
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'notevault' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'notevault'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'notevault' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve a vault over HTTP (the /v1 API and /mcp), or HTTPS with --tls-cert and --tls-key')
            [CompletionResult]::new('reindex', 'reindex', [CompletionResultType]::ParameterValue, 'Rebuild the search index of a vault from its folder (the daemon must be stopped)')
            [CompletionResult]::new('openapi', 'openapi', [CompletionResultType]::ParameterValue, 'Print the OpenAPI 3.1 contract as JSON')
            [CompletionResult]::new('token', 'token', [CompletionResultType]::ParameterValue, 'Create, list and revoke personal access tokens (kept hashed in the state directory; a running daemon sees a change at once)')
            [CompletionResult]::new('login-link', 'login-link', [CompletionResultType]::ParameterValue, 'Print a one-time sign-in link to the web console of the daemon serving a vault (valid 15 minutes, for one sign-in)')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Write a .tar.gz of the vault''s notes and attachments, byte for byte (optionally with the history), the same archive as POST /v1/export; the daemon may be running')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Verify the state directory against the folder: catalog, metadata ids, search index, history (git fsck), leftover temp files; exit 3 on a problem (the daemon must be stopped)')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Ask the daemon serving a vault how it is: seq, index freshness, watcher, history backlog, pending writes; with no daemon serving it, what the folder holds')
            [CompletionResult]::new('search', 'search', [CompletionResultType]::ParameterValue, 'Search a vault''s notes (the daemon serving it, or the folder read directly): the best matches, each with its slug, title and the line that matched')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Print a note''s text as in its file (the daemon serving the vault, or the folder read directly), or lines A to B of it with --lines')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List a vault''s notes (the daemon serving it, or the folder read directly): slug and title, optionally under a path prefix')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish or powershell) on stdout')
            [CompletionResult]::new('device', 'device', [CompletionResultType]::ParameterValue, 'The reference device client: keep a folder in step with a daemon over the sync plane; private notes are encrypted on the device and never leave it in plaintext')
            [CompletionResult]::new('db', 'db', [CompletionResultType]::ParameterValue, 'Hosted mode''s PostgreSQL database: bring its schema up to this notevault''s')
            [CompletionResult]::new('vault', 'vault', [CompletionResultType]::ParameterValue, 'Hosted mode''s vaults in PostgreSQL: create, list and delete them')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Bring a folder vault into a hosted vault, with its history: every revision, its actor and time, and the notes as they are now')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve MCP over stdio (for clients that launch a command): through the daemon serving the vault when one answers, else from the vault itself')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;serve' {
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Address to listen on [default: 127.0.0.1:4000]')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Serve HTTPS with this PEM certificate chain (also NOTEVAULT_TLS_CERT); needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'The PEM private key of --tls-cert: PKCS#8, RSA or EC, unencrypted (also NOTEVAULT_TLS_KEY)')
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'Hosted mode: serve the vaults of this PostgreSQL database (no folder; also NOTEVAULT_DATABASE_URL or `database_url` in the config file)')
            [CompletionResult]::new('--metrics-listen', '--metrics-listen', [CompletionResultType]::ParameterName, 'Serve GET /metrics (Prometheus text, no credential) on this second address too, for a scraper on a private network; hosted mode serves it there only (also NOTEVAULT_METRICS_LISTEN or `metrics_listen` in the config file)')
            [CompletionResult]::new('--blob-store', '--blob-store', [CompletionResultType]::ParameterName, 'Hosted mode: keep attachment bytes in this object store, s3://BUCKET[/PREFIX] (also NOTEVAULT_BLOB_STORE or `blob_store`; credentials and endpoint from the standard AWS_* environment)')
            [CompletionResult]::new('--blob-public-endpoint', '--blob-public-endpoint', [CompletionResultType]::ParameterName, 'Hosted mode: where clients reach the blob store, http(s)://HOST[:PORT]; presigned links are then the store''s own, so attachment bytes skip the instance (also NOTEVAULT_BLOB_PUBLIC_ENDPOINT or `blob_public_endpoint`)')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Logs on stderr: text for a person, or json (one object per line, with one line per request: id, vault, route, status, latency) for a log shipper (also NOTEVAULT_LOG_FORMAT)')
            [CompletionResult]::new('--insecure-open', '--insecure-open', [CompletionResultType]::ParameterName, 'Serve a non-loopback address without authentication and TLS (accept the risk)')
            [CompletionResult]::new('--no-watch', '--no-watch', [CompletionResultType]::ParameterName, 'Do not watch the folder (external edits are then seen when a note is read)')
            [CompletionResult]::new('--review', '--review', [CompletionResultType]::ParameterName, 'Queue every agent write for review, and take review decisions only from a person signed in to the console or a notes.review token (kept in the vault''s settings)')
            [CompletionResult]::new('--migrate', '--migrate', [CompletionResultType]::ParameterName, 'Hosted mode: apply the database''s schema migrations before serving')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;reindex' {
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;openapi' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;token' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Create a token and print it, alone, on stdout (it is shown this once)')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the tokens: name, prefix, scopes, created, expires, last used (never a token)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Revoke a token by its name or its prefix (`nvp_` and 8 characters)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;token;create' {
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'A name for the token, unique in this vault (who or what uses it)')
            [CompletionResult]::new('--scope', '--scope', [CompletionResultType]::ParameterName, 'A permission beyond reading (repeat for both)')
            [CompletionResult]::new('--expires-in', '--expires-in', [CompletionResultType]::ParameterName, 'Lifetime: a number and s, m, h, d or w (30d) [default: no expiry]')
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'Hosted mode: the PostgreSQL database holding the vault')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;token;list' {
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'Hosted mode: the PostgreSQL database holding the vault')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;token;revoke' {
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'Hosted mode: the PostgreSQL database holding the vault')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;token;help' {
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Create a token and print it, alone, on stdout (it is shown this once)')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the tokens: name, prefix, scopes, created, expires, last used (never a token)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Revoke a token by its name or its prefix (`nvp_` and 8 characters)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;token;help;create' {
            break
        }
        'notevault;token;help;list' {
            break
        }
        'notevault;token;help;revoke' {
            break
        }
        'notevault;token;help;help' {
            break
        }
        'notevault;login-link' {
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'Hosted mode: the PostgreSQL database holding the vault')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;export' {
            [CompletionResult]::new('--vault', '--vault', [CompletionResultType]::ParameterName, 'A hosted vault to export instead of a folder, by name or id (with --database)')
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'The hosted vault''s database, postgres://… (also NOTEVAULT_DATABASE_URL)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'The archive to write (.tar.gz); refused if it exists, unless --force')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'The archive to write (.tar.gz); refused if it exists, unless --force')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Add the history: a git bundle of history.git (history.bundle)')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Replace FILE if it exists')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;check' {
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--repair', '--repair', [CompletionResultType]::ParameterName, 'Rebuild what is derived (search index, catalog rows) and remove leftover temp files')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;status' {
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Ask the daemon at this base URL instead of the one the vault''s state directory names')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)')
            [CompletionResult]::new('--cacert', '--cacert', [CompletionResultType]::ParameterName, 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the answers as JSON (those of the /v1 API) instead of a summary')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;search' {
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Results to show, 1..100')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Results to show, 1..100')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Ask the daemon at this base URL instead of the one the vault''s state directory names')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)')
            [CompletionResult]::new('--cacert', '--cacert', [CompletionResultType]::ParameterName, 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the answers as JSON (those of the /v1 API) instead of a summary')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;read' {
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Only lines A to B (1-based, both included; A: to the end, :B from the start)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Ask the daemon at this base URL instead of the one the vault''s state directory names')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)')
            [CompletionResult]::new('--cacert', '--cacert', [CompletionResultType]::ParameterName, 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the answers as JSON (those of the /v1 API) instead of a summary')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;ls' {
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Only notes whose slug starts with this, e.g. projects/ (a folder) or daily/2026-')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'Ask the daemon at this base URL instead of the one the vault''s state directory names')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token, when the daemon requires auth (also NOTEVAULT_TOKEN)')
            [CompletionResult]::new('--cacert', '--cacert', [CompletionResultType]::ParameterName, 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the answers as JSON (those of the /v1 API) instead of a summary')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;completions' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;device' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Make a folder a device of a daemon; with a passphrase, turn private notes on (the first device) or unlock them; then pull')
            [CompletionResult]::new('pull', 'pull', [CompletionResultType]::ParameterValue, 'Apply the daemon''s changes to the folder (the snapshot first, and again after compaction; then the ops after the device''s seq)')
            [CompletionResult]::new('push', 'push', [CompletionResultType]::ParameterValue, 'Push the folder''s changes (private notes `*.private.md` encrypted), then pull; an edit whose base moved is kept as a conflicted copy')
            [CompletionResult]::new('passphrase', 'passphrase', [CompletionResultType]::ParameterValue, 'Wrap the data key under a new passphrase (unwrapped with the current passphrase or the recovery key)')
            [CompletionResult]::new('rotate-key', 'rotate-key', [CompletionResultType]::ParameterValue, 'Make a new data key (keyVersion + 1), seal every private note again under it and push it, then drop the old key; interrupted, both keys stay and running it again finishes')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;device;init' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)')
            [CompletionResult]::new('--passphrase', '--passphrase', [CompletionResultType]::ParameterName, 'The passphrase of private notes (prefer the environment variable)')
            [CompletionResult]::new('--server', '--server', [CompletionResultType]::ParameterName, 'The daemon''s base URL')
            [CompletionResult]::new('--device-id', '--device-id', [CompletionResultType]::ParameterName, 'This device''s id (1..100 characters; its pushes carry `device:<ID>`)')
            [CompletionResult]::new('--recovery', '--recovery', [CompletionResultType]::ParameterName, 'Also make a recovery key (printed once on stdout) when turning private notes on')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;device;pull' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)')
            [CompletionResult]::new('--passphrase', '--passphrase', [CompletionResultType]::ParameterName, 'The passphrase of private notes (prefer the environment variable)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;device;push' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)')
            [CompletionResult]::new('--passphrase', '--passphrase', [CompletionResultType]::ParameterName, 'The passphrase of private notes (prefer the environment variable)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;device;passphrase' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)')
            [CompletionResult]::new('--passphrase', '--passphrase', [CompletionResultType]::ParameterName, 'The passphrase of private notes (prefer the environment variable)')
            [CompletionResult]::new('--new-passphrase', '--new-passphrase', [CompletionResultType]::ParameterName, 'The new passphrase')
            [CompletionResult]::new('--recovery-key', '--recovery-key', [CompletionResultType]::ParameterName, 'Unwrap with the recovery key instead of the current passphrase')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;device;rotate-key' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token for the daemon (a session token: the key routes refuse personal access tokens)')
            [CompletionResult]::new('--passphrase', '--passphrase', [CompletionResultType]::ParameterName, 'The passphrase of private notes (prefer the environment variable)')
            [CompletionResult]::new('--recovery-key', '--recovery-key', [CompletionResultType]::ParameterName, 'The recovery key, when the vault has one: it is renewed to open the new data key')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;device;help' {
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Make a folder a device of a daemon; with a passphrase, turn private notes on (the first device) or unlock them; then pull')
            [CompletionResult]::new('pull', 'pull', [CompletionResultType]::ParameterValue, 'Apply the daemon''s changes to the folder (the snapshot first, and again after compaction; then the ops after the device''s seq)')
            [CompletionResult]::new('push', 'push', [CompletionResultType]::ParameterValue, 'Push the folder''s changes (private notes `*.private.md` encrypted), then pull; an edit whose base moved is kept as a conflicted copy')
            [CompletionResult]::new('passphrase', 'passphrase', [CompletionResultType]::ParameterValue, 'Wrap the data key under a new passphrase (unwrapped with the current passphrase or the recovery key)')
            [CompletionResult]::new('rotate-key', 'rotate-key', [CompletionResultType]::ParameterValue, 'Make a new data key (keyVersion + 1), seal every private note again under it and push it, then drop the old key; interrupted, both keys stay and running it again finishes')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;device;help;init' {
            break
        }
        'notevault;device;help;pull' {
            break
        }
        'notevault;device;help;push' {
            break
        }
        'notevault;device;help;passphrase' {
            break
        }
        'notevault;device;help;rotate-key' {
            break
        }
        'notevault;device;help;help' {
            break
        }
        'notevault;db' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('migrate', 'migrate', [CompletionResultType]::ParameterValue, 'Apply the schema migrations this notevault embeds (each once; a database with a newer schema is refused untouched)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;db;migrate' {
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;db;help' {
            [CompletionResult]::new('migrate', 'migrate', [CompletionResultType]::ParameterValue, 'Apply the schema migrations this notevault embeds (each once; a database with a newer schema is refused untouched)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;db;help;migrate' {
            break
        }
        'notevault;db;help;help' {
            break
        }
        'notevault;vault' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Create a vault and print its id, alone, on stdout')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the vaults: id, name, org, created, state')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete a vault and every row of it (notes, revisions, op log, tokens, sessions, audit events, settings, keys): it is served no more, at once')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;vault;create' {
            [CompletionResult]::new('--org', '--org', [CompletionResultType]::ParameterName, 'The organization whose identity-provider tokens (`org_id` claim) select it')
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;vault;list' {
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;vault;delete' {
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;vault;help' {
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Create a vault and print its id, alone, on stdout')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the vaults: id, name, org, created, state')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete a vault and every row of it (notes, revisions, op log, tokens, sessions, audit events, settings, keys): it is served no more, at once')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;vault;help;create' {
            break
        }
        'notevault;vault;help;list' {
            break
        }
        'notevault;vault;help;delete' {
            break
        }
        'notevault;vault;help;help' {
            break
        }
        'notevault;import' {
            [CompletionResult]::new('--vault', '--vault', [CompletionResultType]::ParameterName, 'The hosted vault to fill, by name or id (made with `notevault vault create`; it must hold no note yet)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The folder''s state directory [default: <FOLDER>/.notevault]')
            [CompletionResult]::new('--database', '--database', [CompletionResultType]::ParameterName, 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (also NOTEVAULT_DATABASE_URL)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--skip-attachments', '--skip-attachments', [CompletionResultType]::ParameterName, 'Bring the notes in without the folder''s attachments and private notes (else a blob store is needed when it has any: NOTEVAULT_BLOB_STORE or `blob_store`, with the AWS_* settings)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;mcp' {
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'A bearer token: the write tools need one holding notes.write (also NOTEVAULT_TOKEN)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'The daemon''s base URL [default: the one serving the vault, if any]')
            [CompletionResult]::new('--cacert', '--cacert', [CompletionResultType]::ParameterName, 'Trust this PEM certificate (a daemon serving HTTPS with its own certificate)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'Where history, metadata and index live [default: <VAULT>/.notevault]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A TOML config file (also NOTEVAULT_CONFIG)')
            [CompletionResult]::new('--no-daemon', '--no-daemon', [CompletionResultType]::ParameterName, 'Serve from the vault itself, even when a daemon serves it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'notevault;help' {
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve a vault over HTTP (the /v1 API and /mcp), or HTTPS with --tls-cert and --tls-key')
            [CompletionResult]::new('reindex', 'reindex', [CompletionResultType]::ParameterValue, 'Rebuild the search index of a vault from its folder (the daemon must be stopped)')
            [CompletionResult]::new('openapi', 'openapi', [CompletionResultType]::ParameterValue, 'Print the OpenAPI 3.1 contract as JSON')
            [CompletionResult]::new('token', 'token', [CompletionResultType]::ParameterValue, 'Create, list and revoke personal access tokens (kept hashed in the state directory; a running daemon sees a change at once)')
            [CompletionResult]::new('login-link', 'login-link', [CompletionResultType]::ParameterValue, 'Print a one-time sign-in link to the web console of the daemon serving a vault (valid 15 minutes, for one sign-in)')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Write a .tar.gz of the vault''s notes and attachments, byte for byte (optionally with the history), the same archive as POST /v1/export; the daemon may be running')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Verify the state directory against the folder: catalog, metadata ids, search index, history (git fsck), leftover temp files; exit 3 on a problem (the daemon must be stopped)')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Ask the daemon serving a vault how it is: seq, index freshness, watcher, history backlog, pending writes; with no daemon serving it, what the folder holds')
            [CompletionResult]::new('search', 'search', [CompletionResultType]::ParameterValue, 'Search a vault''s notes (the daemon serving it, or the folder read directly): the best matches, each with its slug, title and the line that matched')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Print a note''s text as in its file (the daemon serving the vault, or the folder read directly), or lines A to B of it with --lines')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List a vault''s notes (the daemon serving it, or the folder read directly): slug and title, optionally under a path prefix')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish or powershell) on stdout')
            [CompletionResult]::new('device', 'device', [CompletionResultType]::ParameterValue, 'The reference device client: keep a folder in step with a daemon over the sync plane; private notes are encrypted on the device and never leave it in plaintext')
            [CompletionResult]::new('db', 'db', [CompletionResultType]::ParameterValue, 'Hosted mode''s PostgreSQL database: bring its schema up to this notevault''s')
            [CompletionResult]::new('vault', 'vault', [CompletionResultType]::ParameterValue, 'Hosted mode''s vaults in PostgreSQL: create, list and delete them')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Bring a folder vault into a hosted vault, with its history: every revision, its actor and time, and the notes as they are now')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve MCP over stdio (for clients that launch a command): through the daemon serving the vault when one answers, else from the vault itself')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'notevault;help;serve' {
            break
        }
        'notevault;help;reindex' {
            break
        }
        'notevault;help;openapi' {
            break
        }
        'notevault;help;token' {
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Create a token and print it, alone, on stdout (it is shown this once)')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the tokens: name, prefix, scopes, created, expires, last used (never a token)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Revoke a token by its name or its prefix (`nvp_` and 8 characters)')
            break
        }
        'notevault;help;token;create' {
            break
        }
        'notevault;help;token;list' {
            break
        }
        'notevault;help;token;revoke' {
            break
        }
        'notevault;help;login-link' {
            break
        }
        'notevault;help;export' {
            break
        }
        'notevault;help;check' {
            break
        }
        'notevault;help;status' {
            break
        }
        'notevault;help;search' {
            break
        }
        'notevault;help;read' {
            break
        }
        'notevault;help;ls' {
            break
        }
        'notevault;help;completions' {
            break
        }
        'notevault;help;device' {
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Make a folder a device of a daemon; with a passphrase, turn private notes on (the first device) or unlock them; then pull')
            [CompletionResult]::new('pull', 'pull', [CompletionResultType]::ParameterValue, 'Apply the daemon''s changes to the folder (the snapshot first, and again after compaction; then the ops after the device''s seq)')
            [CompletionResult]::new('push', 'push', [CompletionResultType]::ParameterValue, 'Push the folder''s changes (private notes `*.private.md` encrypted), then pull; an edit whose base moved is kept as a conflicted copy')
            [CompletionResult]::new('passphrase', 'passphrase', [CompletionResultType]::ParameterValue, 'Wrap the data key under a new passphrase (unwrapped with the current passphrase or the recovery key)')
            [CompletionResult]::new('rotate-key', 'rotate-key', [CompletionResultType]::ParameterValue, 'Make a new data key (keyVersion + 1), seal every private note again under it and push it, then drop the old key; interrupted, both keys stay and running it again finishes')
            break
        }
        'notevault;help;device;init' {
            break
        }
        'notevault;help;device;pull' {
            break
        }
        'notevault;help;device;push' {
            break
        }
        'notevault;help;device;passphrase' {
            break
        }
        'notevault;help;device;rotate-key' {
            break
        }
        'notevault;help;db' {
            [CompletionResult]::new('migrate', 'migrate', [CompletionResultType]::ParameterValue, 'Apply the schema migrations this notevault embeds (each once; a database with a newer schema is refused untouched)')
            break
        }
        'notevault;help;db;migrate' {
            break
        }
        'notevault;help;vault' {
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Create a vault and print its id, alone, on stdout')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the vaults: id, name, org, created, state')
            [CompletionResult]::new('delete', 'delete', [CompletionResultType]::ParameterValue, 'Delete a vault and every row of it (notes, revisions, op log, tokens, sessions, audit events, settings, keys): it is served no more, at once')
            break
        }
        'notevault;help;vault;create' {
            break
        }
        'notevault;help;vault;list' {
            break
        }
        'notevault;help;vault;delete' {
            break
        }
        'notevault;help;import' {
            break
        }
        'notevault;help;mcp' {
            break
        }
        'notevault;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
