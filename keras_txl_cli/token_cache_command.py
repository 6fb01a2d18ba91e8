"""`keras-txl token-cache`: show or free the token cache, the corpora that
`keras-txl train` tokenized, kept on disk so that the next run maps them
in a second (`keras_txl.data.token_cache`). Not the model's memory nor
keras-hub's key/value cache: a cache of token ids.

    keras-txl token-cache [--list | --clear]

`keras-txl cache`, its name before, still runs it.
"""

import os

OLD_NAME = "cache"


def add_parser(subparsers):
    """Adds `token-cache` (and its old name, `cache`) to `subparsers`."""
    parser = subparsers.add_parser(
        "token-cache",
        aliases=[OLD_NAME],
        help="show (--list, the default) or free (--clear) the token cache "
        "(`cache`: its old name)",
        description="The token cache holds the token ids of the corpora "
        "that `keras-txl train` tokenized, so that the next run maps them "
        "in a second. Its folder is $KERAS_TXL_CACHE, else "
        "$KERAS_HOME/keras_txl_cache (~/.keras/keras_txl_cache). "
        "`keras-txl cache`, the command's name before, still works.",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--list", action="store_true", help="each entry and its size"
    )
    action.add_argument(
        "--clear", action="store_true", help="delete the cache's folder"
    )
    parser.set_defaults(run=run)


def run(args):
    """Lists the token cache's entries, or deletes its folder."""
    from keras_txl.data import token_cache

    folder = token_cache.token_cache_folder()
    if args.clear:
        count, size = token_cache.clear_token_cache()
        print(f"Removed {count} files ({size / 2**20:,.1f} MiB): {folder}")
        return 0
    entries = token_cache.token_cache_entries()
    total = sum(entry["bytes"] for entry in entries)
    print(
        f"Token cache: {folder} ({len(entries)} entries, "
        f"{total / 2**20:,.1f} MiB)"
    )
    for entry in entries:
        what = entry.get("source") or os.path.basename(entry["files"][0])
        tokens = entry.get("tokens")
        count = "" if tokens is None else f", {tokens:,} tokens"
        print(
            f"  {entry['kind']:<11} {entry['bytes'] / 2**20:9,.2f} MiB  "
            f"{what}{count}"
        )
    return 0
