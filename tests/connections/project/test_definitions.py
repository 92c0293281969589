"""Each field of `define_connection(...)` and `define_tool(...)`, and `${VAR}` expansion."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel, Field

from connections import (
    ConnectionDefinition,
    EnvironmentVariableMissing,
    OAuthConfig,
    Timeouts,
    ToolContext,
    ToolInputError,
    define_connection,
    define_tool,
)
from connections.serving import expand_map


def codes(defn: ConnectionDefinition) -> list[str]:
    return [p.code for p in defn.problems]


def test_url_makes_a_streamable_http_connection() -> None:
    defn = define_connection(url="https://mcp.example.com/mcp")
    assert (defn.url, defn.kind, defn.transport, codes(defn)) == (
        "https://mcp.example.com/mcp",
        "http",
        "streamable-http",
        [],
    )


@pytest.mark.parametrize("spelling", ["streamable-http", "http", "streamableHttp"])
def test_transport_accepts_the_spellings_clients_write(spelling: str) -> None:
    assert define_connection(url="https://x.example.com/mcp", transport=spelling).kind == "http"


def test_transport_sse_makes_a_legacy_sse_connection() -> None:
    defn = define_connection(url="https://x.example.com/sse", transport="sse")
    assert (defn.kind, defn.transport) == ("sse", "sse")


def test_headers_are_kept_unexpanded_until_a_client_opens() -> None:
    defn = define_connection(url="https://x.example.com/mcp", headers={"Authorization": "Bearer ${TOKEN}"})
    assert defn.headers == {"Authorization": "Bearer ${TOKEN}"}
    assert codes(defn) == []


def test_header_values_must_be_strings_and_the_message_never_shows_them() -> None:
    defn = define_connection(url="https://x.example.com/mcp", headers={"X-Secret": 12345})  # type: ignore[dict-item]
    assert codes(defn) == ["bad-field-type"]
    assert "12345" not in defn.problems[0].message
    assert "a value of type int" in defn.problems[0].message


def test_min_log_level_caps_what_is_forwarded_and_must_name_a_level() -> None:
    assert define_connection(url="https://x.example.com/mcp", min_log_level="warning").min_log_level == "warning"
    assert define_connection(url="https://x.example.com/mcp").min_log_level is None
    bad = define_connection(url="https://x.example.com/mcp", min_log_level="WARN")
    assert codes(bad) == ["bad-field-type"] and bad.min_log_level is None
    assert "field 'min_log_level' must be one of 'debug', 'info'" in bad.problems[0].message


def test_command_args_env_cwd_make_a_stdio_connection(tmp_path: object) -> None:
    defn = define_connection(command="npx", args=["-y", "server"], env={"DEBUG": "1"}, cwd="/srv")
    assert (defn.kind, defn.command, defn.args, dict(defn.env), defn.cwd) == (
        "stdio", "npx", ("-y", "server"), {"DEBUG": "1"}, "/srv"
    )  # fmt: skip


def test_args_must_be_a_list_of_strings() -> None:
    defn = define_connection(command="npx", args="-y server")  # type: ignore[arg-type]
    assert [p.message for p in defn.problems] == ["field 'args' must be a list of strings, got '-y server'"]


def test_oauth_true_means_a_default_oauth_config() -> None:
    assert define_connection(url="https://x.example.com/mcp", oauth=True).oauth == OAuthConfig()


def test_oauth_accepts_an_oauth_config_with_scopes() -> None:
    config = OAuthConfig(scopes=("read", "write"), client_id="agent")
    assert define_connection(url="https://x.example.com/mcp", oauth=config).oauth is config


def test_oauth_must_be_a_bool_or_an_oauth_config() -> None:
    defn = define_connection(url="https://x.example.com/mcp", oauth="yes")  # type: ignore[arg-type]
    assert [p.message for p in defn.problems] == ["field 'oauth' must be True, False or an OAuthConfig(...), got 'yes'"]


def test_host_only_keeps_a_connection_off_the_model() -> None:
    defn = define_connection(url="https://x.example.com/mcp", host_only=True)
    assert defn.host_only and not defn.attached


def test_account_with_named_servers() -> None:
    defn = define_connection(account=True, servers=["linear", "notion"])
    assert (defn.kind, defn.servers, codes(defn)) == ("account", ("linear", "notion"), [])


@pytest.mark.parametrize("servers", [None, "*"])
def test_account_without_servers_or_with_star_forwards_every_connector(servers: str | None) -> None:
    assert define_connection(account=True, servers=servers).servers == "*"


def test_trace_content_is_off_unless_opted_in_and_must_be_a_bool() -> None:
    assert define_connection(url="https://x.example.com/mcp").trace_content is False
    assert define_connection(url="https://x.example.com/mcp", trace_content=True).trace_content is True
    bad = define_connection(url="https://x.example.com/mcp", trace_content="yes")  # type: ignore[arg-type]
    assert codes(bad) == ["bad-field-type"] and bad.trace_content is False
    assert "'trace_content' must be True or False" in bad.problems[0].message


def test_auth_callback_is_kept_and_callable() -> None:
    def auth(session: object) -> dict[str, dict[str, str]]:
        return {"headers": {"X-Tenant": "t1"}}

    defn = define_connection(url="https://x.example.com/mcp", auth=auth)
    assert defn.auth is auth and codes(defn) == []


def test_auth_must_be_callable() -> None:
    defn = define_connection(url="https://x.example.com/mcp", auth={"headers": {}})  # type: ignore[arg-type]
    assert codes(defn) == ["bad-field-type"] and defn.auth is None


def test_advertise_tools_makes_a_connection_advertised_not_attached() -> None:
    defn = define_connection(url="https://x.example.com/mcp", advertise_tools=True)
    assert defn.advertise_tools and not defn.attached


def test_a_plain_connection_is_attached() -> None:
    assert define_connection(url="https://x.example.com/mcp").attached


def test_flags_must_be_booleans() -> None:
    defn = define_connection(url="https://x.example.com/mcp", host_only="yes")  # type: ignore[arg-type]
    assert [p.message for p in defn.problems] == ["field 'host_only' must be True or False, got 'yes'"]


def test_timeouts_default_and_override_by_dict_or_object() -> None:
    assert define_connection(command="x").timeouts == Timeouts(connect=15.0, list=30.0, call=120.0, auth=10.0)
    assert define_connection(command="x", timeouts={"call": 5}).timeouts == Timeouts(call=5.0)
    assert define_connection(command="x", timeouts=Timeouts(list=2.0)).timeouts.list == 2.0


def test_an_unknown_timeout_names_the_known_ones() -> None:
    defn = define_connection(command="x", timeouts={"read": 5})
    assert [p.message for p in defn.problems] == [
        "unknown timeout 'read'; timeouts take auth, call, connect, list, question"
    ]


def test_allow_and_deny_lists_filter_tools_with_deny_winning() -> None:
    defn = define_connection(command="x", allow_tools=["read", "write"], deny_tools=["write"])
    assert [defn.allows_tool(t) for t in ("read", "write", "delete")] == [True, False, False]
    assert define_connection(command="x", deny_tools=["rm"]).allows_tool("anything")


def test_description_and_protocol_are_kept() -> None:
    defn = define_connection(command="x", description="Notes.", protocol="legacy")
    assert (defn.description, defn.protocol) == ("Notes.", "legacy")


def test_an_unknown_field_suggests_the_closest_one() -> None:
    defn = define_connection(command="x", advertiseTools=True)
    assert [p.message for p in defn.problems] == [
        "unknown field 'advertiseTools' in define_connection(...); did you mean 'advertise_tools'?"
    ]


def test_an_unknown_field_with_no_close_match_lists_the_fields() -> None:
    message = define_connection(command="x", zzz=1).problems[0].message
    assert message.startswith("unknown field 'zzz' in define_connection(...); known fields: url, transport, headers")


def test_define_connection_records_the_line_of_its_call() -> None:
    defn = define_connection(command="x")
    assert defn.source is not None and defn.source.name == "test_definitions.py"
    assert (
        defn.line is not None and "define_connection(command=" in open(defn.source).read().splitlines()[defn.line - 1]
    )


def test_repr_never_shows_header_or_env_values() -> None:
    defn = define_connection(url="https://x.example.com/mcp", headers={"Authorization": "Bearer sk-secret"})
    assert "sk-secret" not in repr(defn)


def test_expansion_reads_var_and_env_var_forms() -> None:
    values = {"Authorization": "Bearer ${TOKEN}", "X-Team": "${env:TEAM}", "X-Plain": "plain"}
    env = {"TOKEN": "t0k", "TEAM": "core"}
    assert expand_map("crm", "header", values, env) == {
        "Authorization": "Bearer t0k",
        "X-Team": "core",
        "X-Plain": "plain",
    }


def test_a_missing_variable_names_connection_key_and_variable_but_no_value() -> None:
    with pytest.raises(EnvironmentVariableMissing) as caught:
        expand_map("crm", "header", {"Authorization": "Bearer ${CRM_TOKEN}"}, {"OTHER": "secret-value"})
    assert str(caught.value) == (
        "connection 'crm': header 'Authorization' reads ${CRM_TOKEN}, but CRM_TOKEN is not set; "
        "export CRM_TOKEN before starting agent-sdk"
    )


class Greeting(BaseModel):
    name: str = Field(min_length=1)


def test_a_tool_with_a_pydantic_input_publishes_its_schema_and_validates() -> None:
    tool = define_tool(description="Greet.", input=Greeting, effect="read", execute=lambda v, ctx: f"hi {v.name}")
    assert tool.input_schema["properties"]["name"]["minLength"] == 1
    assert tool.effect == "read" and tool.problems == ()
    with pytest.raises(ToolInputError, match="name: String should have at least 1 character"):
        tool.named("greet", None).validate_input({"name": ""})


def test_a_tool_with_a_json_schema_input_forwards_it() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = define_tool(description="Search.", input=schema, effect="write", execute=lambda v, ctx: v)
    assert tool.input_schema == schema and tool.input_model is None and tool.effect == "write"


def test_tool_input_must_be_an_object() -> None:
    tool = define_tool(description="x", execute=lambda v, ctx: v).named("x", None)
    with pytest.raises(ToolInputError, match="input must be a JSON object, got list"):
        tool.validate_input([1])


@pytest.mark.anyio
async def test_tools_run_async_and_sync_execute_bodies() -> None:
    async def async_body(value: Greeting, ctx: ToolContext) -> dict[str, str]:
        await anyio.lowlevel.checkpoint()
        return {"greeting": f"hi {value.name}"}

    def sync_body(value: Greeting, ctx: ToolContext) -> Greeting:
        return Greeting(name=value.name.upper())

    ctx = ToolContext(host=None)
    a = define_tool(description="a", input=Greeting, execute=async_body)
    s = define_tool(description="s", input=Greeting, execute=sync_body)
    assert await a.run({"name": "ada"}, ctx) == {"greeting": "hi ada"}
    assert await s.run({"name": "ada"}, ctx) == {"name": "ADA"}


def test_a_tool_needs_a_callable_execute() -> None:
    tool = define_tool(description="x", execute="not a function")  # type: ignore[arg-type]
    assert [p.code for p in tool.problems] == ["bad-field-type"]


def test_advertise_resources_true_offers_every_resource_and_template_but_the_denied() -> None:
    defn = define_connection(command="x", advertise_resources=True, deny_resources=["test://secret", "test://t/{id}"])
    assert defn.allows_resource("test://static/resource/1") and defn.allows_template("test://{x}")
    assert not defn.allows_resource("test://secret")
    assert not defn.allows_template("test://t/{id}") and not defn.allows_resource("test://t/7")
    assert not define_connection(command="x").allows_resource("test://a")


def test_advertise_resources_list_offers_named_uris_and_what_a_named_template_matches() -> None:
    defn = define_connection(command="x", advertise_resources=["demo://readme", "demo://docs/{name}"])
    assert defn.allows_resource("demo://readme")
    assert defn.allows_resource("demo://docs/intro")
    assert defn.allows_template("demo://docs/{name}")
    assert not defn.allows_resource("demo://other")
    assert not defn.allows_template("demo://other/{name}")
    assert not defn.problems


def test_advertise_prompts_list_offers_only_the_named_prompts_and_deny_wins() -> None:
    defn = define_connection(command="x", advertise_prompts=["greet", "plan"], deny_prompts=["plan"])
    assert defn.allows_prompt("greet")
    assert not defn.allows_prompt("plan") and not defn.allows_prompt("other")


def test_advertise_prompts_of_the_wrong_type_is_a_diagnostic_not_an_exception() -> None:
    defn = define_connection(command="x", advertise_prompts="greet")
    assert [p.message for p in defn.problems] == [
        "field 'advertise_prompts' must be True, False or a list of prompt names, got 'greet'"
    ]
    assert defn.advertise_prompts is False
