"""moto_server with a thin, test-owned layer for what moto 5.2.5 does not do (controller/tests/aws.rs).

Real moto: every EC2, SSM, IAM, SQS and EKS call, its state (VPCs, subnets, security groups, images, launch
templates, instances, tags) and its answers.

Injected here, each switched by a file the test writes (read on every request, so a test changes
them while the server runs):
- CreateFleet honours override `Priority` (lowest first), as EC2's `lowest-price` and
  `price-capacity-optimized` do for the prices Karpenter puts there; moto launches the first
  override in request order whatever its priority.
- Insufficient capacity: overrides whose (instance type, zone, capacity type) is listed in
  `$MOTO_LAYER_DIR/ice.json` are not launched, and each comes back in the response's `Errors` with
  `InsufficientInstanceCapacity`, as EC2 answers (moto never reports an error). Every listed
  override is reported, also ones pricier than the one launched, which EC2's lowest-price
  strategy may not have tried.
- A failing fleet: while `$MOTO_LAYER_DIR/fleet_error.json` holds `[code, message]`, every
  override of every CreateFleet comes back in `Errors` with that code and nothing launches, as EC2
  answers an instant fleet it cannot launch at all (`UnauthorizedOperation` for a role the caller
  may not pass, `InvalidParameterValue`, ...).
- Denied actions: an action listed in `$MOTO_LAYER_DIR/deny.json` (`ec2:DescribeSubnets`) answers
  HTTP 403 `UnauthorizedOperation` as EC2 does for a missing IAM permission (moto enforces no IAM).
- Throttling: an action listed in `$MOTO_LAYER_DIR/throttle.json` (`ec2:CreateFleet`) answers
  HTTP 503 `RequestLimitExceeded`, as EC2 throttles a caller over its request rate (moto never
  throttles).
- On-demand prices: moto has no Pricing service (it answers HTTP 500). While
  `$MOTO_LAYER_DIR/pricing.json` ({region: {instance type: USD}}) exists, `GetProducts` answers
  the shared-tenancy query with one price-list document per listed type, in the Pricing API's
  shape; without it moto's own answer stands.
- EKS-optimized AMI parameters: `$MOTO_LAYER_DIR/ssm.json` ({name: value}) is served under
  `/aws/service/eks/...`, which moto does not ship and refuses to let a client put.
- Termination that takes a while: while `$MOTO_LAYER_DIR/shutting_down.json` holds a number of
  seconds, an instance TerminateInstances ends stays `shutting-down` that long before it is
  `terminated`, as EC2's instances do (moto terminates at once).
- Every CreateFleet request is appended, as parsed, to `$MOTO_LAYER_DIR/create_fleet.jsonl`
  (with what was launched), so the test asserts the request the controller sent; every call's
  caller (access key ID) and IAM action (`ec2:CreateFleet`) to `$MOTO_LAYER_DIR/actions.log`.

Usage: python3 moto_layer.py PORT (prints "ready" when it listens).
"""

import io
import json
import os
import sys
import threading
import time
import urllib.parse

from moto.ec2.responses import fleets as fleet_responses
from moto.ec2.models import instances as instance_models
from moto.ec2.utils import random_fleet_id
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server import werkzeug_app
from moto.ssm import models as ssm_models

LAYER_DIR = os.environ["MOTO_LAYER_DIR"]
LOCK = threading.Lock()


def read(name, default):
    try:
        with open(os.path.join(LAYER_DIR, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return default


# --- CreateFleet: priority order, insufficient capacity, a record of each request -----------------

def create_fleet(self):
    on_demand_options = self._get_param("OnDemandOptions", {})
    spot_options = self._get_param("SpotOptions", {})
    target = self._get_param("TargetCapacitySpecification", {})
    configs = self._get_param("LaunchTemplateConfigs", [])
    tags = self._get_param("TagSpecifications", [])
    fleet_type = self._get_param("Type", if_none="maintain")
    self.error_on_dryrun()
    capacity_type = target.get("DefaultTargetCapacityType", "on-demand")
    ice = {tuple(x) for x in read("ice.json", [])}
    fleet_error = read("fleet_error.json", None)
    errors, kept = [], []
    for config in configs:
        overrides = sorted(config.get("Overrides", []), key=lambda o: float(o.get("Priority", "inf")))
        spec = config.get("LaunchTemplateSpecification", {})
        for o in overrides:
            if fleet_error:
                errors.append({
                    "ErrorCode": fleet_error[0],
                    "ErrorMessage": fleet_error[1],
                    "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": spec, "Overrides": o},
                    "Lifecycle": capacity_type,
                })
            elif (o.get("InstanceType"), o.get("AvailabilityZone"), capacity_type) in ice:
                errors.append({
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": f"We currently do not have sufficient {o.get('InstanceType')} capacity "
                                    f"in the Availability Zone you requested ({o.get('AvailabilityZone')}).",
                    "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": spec, "Overrides": o},
                    "Lifecycle": capacity_type,
                })
            else:
                kept.append((float(o.get("Priority", "inf")), spec, o))
    # Across launch templates too: the cheapest override first (stable).
    kept.sort(key=lambda k: k[0])
    result = {}
    launched = None
    if kept:
        _, spec, first = kept[0]
        fleet = self.ec2_backend.create_fleet(
            on_demand_options=on_demand_options,
            spot_options=spot_options,
            target_capacity_specification=target,
            launch_template_configs=[{"LaunchTemplateSpecification": spec, "Overrides": [first]}],
            excess_capacity_termination_policy=self._get_param("ExcessCapacityTerminationPolicy"),
            replace_unhealthy_instances=self._get_param("ReplaceUnhealthyInstances"),
            terminate_instances_with_expiration=self._get_param("TerminateInstancesWithExpiration", if_none=True),
            fleet_type=fleet_type,
            valid_from=self._get_param("ValidFrom"),
            valid_until=self._get_param("ValidUntil"),
            tag_specifications=tags,
        )
        result["FleetId"] = fleet.id
        if fleet.instances is not None:
            result["Instances"] = fleet.instances
        launched = first
    else:
        result["FleetId"] = random_fleet_id()
        result["Instances"] = []
    if errors:
        result["Errors"] = errors
    record = {
        "Type": fleet_type,
        "TargetCapacitySpecification": target,
        "OnDemandOptions": on_demand_options,
        "SpotOptions": spot_options,
        "LaunchTemplateConfigs": configs,
        "TagSpecifications": tags,
        "Launched": launched,
        "Errors": [e["LaunchTemplateAndOverrides"]["Overrides"] for e in errors],
    }
    with LOCK, open(os.path.join(LAYER_DIR, "create_fleet.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
    return fleet_responses.ActionResult(result)


fleet_responses.Fleets.create_fleet = create_fleet


# --- SSM: the EKS-optimized AMI parameters -------------------------------------------------------

original_loading = ssm_models.ParameterDict._check_loading_status


def check_loading_status(self, key):
    original_loading(self, key)
    key = str(key or "")
    if key.startswith("/aws/service/eks/") or key.startswith("/aws/service/bottlerocket/"):
        for name, value in read("ssm.json", {}).items():
            versions = super(ssm_models.ParameterDict, self).__getitem__(name)
            if not versions or versions[-1].value != value:
                versions.append(ssm_models.Parameter(
                    account_id=self.account_id, name=name, value=value, parameter_type="String",
                    description=None, allowed_pattern=None, keyid=None, last_modified_date=0,
                    version=len(versions) + 1, data_type="aws:ec2:image"))


ssm_models.ParameterDict._check_loading_status = check_loading_status


# --- Denied actions ------------------------------------------------------------------------------

def action_of(environ, body):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    service = auth.split("/")[3] if auth.count("/") >= 4 else "ec2"
    path = environ.get("PATH_INFO", "")
    if service == "eks":  # REST: GET /clusters/NAME
        if environ.get("REQUEST_METHOD") == "GET" and path.startswith("/clusters/") and path.count("/") == 2:
            return "eks:DescribeCluster"
        return f"eks:{environ.get('REQUEST_METHOD')} {path}"
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:  # JSON protocol: "AmazonSSM.GetParameter"
        service = {"AmazonSSM": "ssm", "AmazonSQS": "sqs", "AWSPriceListService": "pricing"}.get(target.split(".")[0], target.split(".")[0])
        return f"{service}:{target.split('.')[-1]}"
    params = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    action = params.get("Action", [None])[0]
    if not action:
        return None
    return f"{service}:{action}"


def denied(environ, start_response):
    """Records the action; the 403 answer for a denied one, or None to let moto answer."""
    if environ.get("REQUEST_METHOD") not in ("POST", "GET"):
        return None
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    action = action_of(environ, body)
    if action:
        # "Credential=<access key>/<date>/<region>/<service>/aws4_request": who called.
        auth = environ.get("HTTP_AUTHORIZATION", "")
        caller = auth.split("Credential=")[-1].split("/")[0] if "Credential=" in auth else "-"
        with LOCK, open(os.path.join(LAYER_DIR, "actions.log"), "a") as f:
            f.write(f"{caller} {action}\n")
    if action in set(read("throttle.json", [])):
        payload = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error>"
                   b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error>"
                   b"</Errors><RequestID>throttled-by-test-layer</RequestID></Response>")
        start_response("503 Service Unavailable", [("Content-Type", "text/xml"),
                                                   ("Content-Length", str(len(payload)))])
        return [payload]
    if action not in set(read("deny.json", [])):
        return None
    message = (f"You are not authorized to perform this operation. User: "
               f"arn:aws:sts::123456789012:assumed-role/KarpenterController/test is not "
               f"authorized to perform: {action} because no identity-based policy allows "
               f"the {action} action")
    if environ.get("HTTP_X_AMZ_TARGET") or action.startswith("eks:"):
        payload = json.dumps({"__type": "AccessDeniedException", "message": message}).encode()
        start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.1"),
                                           ("Content-Length", str(len(payload)))])
        return [payload]
    payload = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error>"
               f"<Code>UnauthorizedOperation</Code><Message>{message}</Message></Error></Errors>"
               f"<RequestID>denied-by-test-layer</RequestID></Response>").encode()
    start_response("403 Forbidden", [("Content-Type", "text/xml"), ("Content-Length", str(len(payload)))])
    return [payload]


def price_list(environ, start_response):
    """The GetProducts answer from pricing.json, or None to let moto answer."""
    if environ.get("HTTP_X_AMZ_TARGET") != "AWSPriceListService.GetProducts":
        return None
    prices = read("pricing.json", None)
    if prices is None:
        return None
    body = environ["wsgi.input"].read()
    environ["wsgi.input"] = io.BytesIO(body)
    request = json.loads(body or b"{}")
    filters = {f.get("Field"): f.get("Value") for f in request.get("Filters", [])}
    documents = []
    if filters.get("tenancy") == "Shared":
        region = filters.get("regionCode")
        for instance_type, usd in sorted(prices.get(region, {}).items()):
            documents.append(json.dumps({
                "product": {"productFamily": "Compute Instance",
                            "attributes": {"instanceType": instance_type, "regionCode": region,
                                           "operatingSystem": "Linux", "tenancy": "Shared"}},
                "serviceCode": "AmazonEC2",
                "terms": {"OnDemand": {"T.JRTCKXETXF": {"priceDimensions": {"T.JRTCKXETXF.6YS6EN2CT7": {
                    "unit": "Hrs", "pricePerUnit": {"USD": str(usd)}}}}}},
            }))
    payload = json.dumps({"FormatVersion": "aws_v1", "PriceList": documents}).encode()
    start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1"),
                              ("Content-Length", str(len(payload)))])
    return [payload]


# --- Termination that takes a while -----------------------------------------------------------------

original_terminate = instance_models.Instance.terminate


def terminate(self):
    previous = original_terminate(self)
    seconds = read("shutting_down.json", None)
    if seconds:
        until = getattr(self, "_layer_shutting_down_until", None)
        if until is None:
            until = self._layer_shutting_down_until = time.time() + float(seconds)
        if time.time() < until:
            self._state.name, self._state.code = "shutting-down", 32
    return previous


original_all_reservations = instance_models.InstanceBackend.all_reservations


def all_reservations(self, filters=None):
    # Every instance read goes through here: a shutting-down instance whose time is up is
    # terminated before anyone sees it.
    now = time.time()
    for reservation in self.reservations.values():
        for instance in reservation.instances:
            until = getattr(instance, "_layer_shutting_down_until", None)
            if until is not None and now >= until and instance._state.name == "shutting-down":
                instance._state.name, instance._state.code = "terminated", 48
    return original_all_reservations(self, filters)


instance_models.Instance.terminate = terminate
instance_models.InstanceBackend.all_reservations = all_reservations


original_dispatcher_call = werkzeug_app.DomainDispatcherApplication.__call__


def dispatcher_call(self, environ, start_response):
    answer = denied(environ, start_response)
    if answer is not None:
        return answer
    answer = price_list(environ, start_response)
    if answer is not None:
        return answer
    return original_dispatcher_call(self, environ, start_response)


werkzeug_app.DomainDispatcherApplication.__call__ = dispatcher_call


if __name__ == "__main__":
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
    server.start()
    print("ready", flush=True)
    threading.Event().wait()
