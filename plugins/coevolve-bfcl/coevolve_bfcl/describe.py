"""Turning an executed call sequence into a request a user might write (offline templater).

The random explorer has no language model, so the query of a synthetic task is written from
the calls it made. Frequent functions have hand-written phrases; every other function is
described by the first sentence of its BFCL doc with its arguments spelled out. The wording
is plain but complete: every argument value the reference calls used appears in the text,
so the task is solvable from the query alone.
"""

from __future__ import annotations

from typing import Any, Callable

from coevolve_sdk import Step

from .calls import parse_action

#: ``short_doc(name)``: the first sentence of a function's BFCL doc (KeyError for an unknown one)
ShortDoc = Callable[[str], str]

TEMPLATES: dict[str, str] = {
    "cd": "go into the folder '{folder}'",
    "ls": "list what is in the current folder",
    "pwd": "tell me which folder I am in",
    "mkdir": "create a folder named '{dir_name}'",
    "touch": "create an empty file called '{file_name}'",
    "cat": "show me what '{file_name}' contains",
    "grep": "find the lines of '{file_name}' that contain '{pattern}'",
    "mv": "move '{source}' to '{destination}'",
    "cp": "copy '{source}' to '{destination}'",
    "rm": "delete '{file_name}'",
    "rmdir": "remove the folder '{dir_name}'",
    "sort": "sort the lines of '{file_name}'",
    "tail": "show the last lines of '{file_name}'",
    "diff": "compare '{file_name1}' with '{file_name2}'",
    "get_stock_info": "look up the current details of the stock {symbol}",
    "add_to_watchlist": "add {stock} to my watchlist",
    "remove_stock_from_watchlist": "take {symbol} off my watchlist",
    "get_watchlist": "show my watchlist",
    "get_order_details": "show the details of order {order_id}",
    "cancel_order": "cancel order {order_id}",
    "get_account_info": "show my trading account details",
    "get_current_time": "tell me the current market time",
    "get_tweet": "show tweet {tweet_id}",
    "retweet": "retweet tweet {tweet_id}",
    "get_user_tweets": "show the tweets of {username}",
    "follow_user": "follow {username_to_follow}",
    "unfollow_user": "unfollow {username_to_unfollow}",
    "get_user_id": "find the user id of {user}",
    "send_message": "send the message '{message}' to user {receiver_id}",
    "get_ticket": "show ticket {ticket_id}",
    "close_ticket": "close ticket {ticket_id}",
    "startEngine": "start the engine in {ignitionMode} mode",
    "check_tire_pressure": "check the tire pressure",
    "get_current_speed": "tell me the current speed",
    "list_all_airports": "list all the airports",
}


def _value(v: Any) -> str:
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return repr(v)


def describe_call(short_doc: ShortDoc, name: str, args: dict[str, Any]) -> str:
    tpl = TEMPLATES.get(name)
    if tpl is not None:
        try:
            phrase = tpl.format(**args)
            extra = {k: v for k, v in args.items() if "{" + k + "}" not in tpl}
            if extra:
                phrase += " (" + ", ".join(f"{k.replace('_', ' ')} {_value(v)}" for k, v in extra.items()) + ")"
            return phrase
        except (KeyError, IndexError, ValueError):
            pass
    try:
        base = short_doc(name).rstrip(".") or name
    except KeyError:
        base = name
    base = base[0].lower() + base[1:] if base else name
    if args:
        base += " with " + ", ".join(f"{k.replace('_', ' ')} {_value(v)}" for k, v in args.items())
    return base


def describe_steps(short_doc: ShortDoc, steps: list[Step]) -> str:
    phrases: list[str] = []
    for s in steps:
        try:
            parsed = parse_action(s.action)
        except Exception:
            continue
        for c, pos in zip(parsed.calls, parsed.positional):
            phrases.append(describe_call(short_doc, c.name, dict(c.arguments)))
    if not phrases:
        return "Nothing needs to be done."
    if len(phrases) == 1:
        return "Please " + phrases[0] + "."
    body = "First, " + phrases[0]
    for p in phrases[1:-1]:
        body += "; then " + p
    body += "; finally, " + phrases[-1] + "."
    return "Please do the following. " + body
