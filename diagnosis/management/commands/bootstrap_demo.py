import json
from pathlib import Path

from django.conf import settings
from diagnosis.management.arguments import ValidatedCommand, port as port_number

from diagnosis.services.knowledge import knowledge_load_folder
from diagnosis.services.users import api_client_create, support_user_create


class Command(ValidatedCommand):
    help = "Load the demo runbooks, create a demo API client and a support user, and print ready-to-paste curl commands."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=port_number, default=8000)

    def handle(self, host, port, **options):
        root = Path(settings.DEMO_SCENARIOS_DIR)
        documents = chunks = 0
        for folder in sorted(p / "runbooks" for p in root.iterdir() if (p / "runbooks").is_dir()):
            counts = knowledge_load_folder(folder=folder, prefix="runbooks/")
            documents += counts["documents"] + counts["unchanged"]
            chunks += counts["chunks"]
        _, token = api_client_create(username="demo-client")
        _, password = support_user_create(username="support")
        base = f"http://{host}:{port}"
        question = "Why is payment-service failing?"
        body = json.dumps({"question": question, "sessionId": "demo-1"})
        out = self.stdout.write
        out(self.style.SUCCESS(f"Demo ready: {documents} runbooks, {settings.LLM_PROVIDER} model, "
                               f"{settings.METRICS_BACKEND}/{settings.LOGS_BACKEND} telemetry."))
        out(f"\nAPI token of demo-client: {token}")
        out(f"Audit console: {base}/admin/  (user: support, password: {password})")
        out(f"API docs: {base}/api/docs\n")
        out("Try it:")
        out(f"  curl -s -X POST {base}/api/chat -H 'Authorization: Token {token}' -H 'Content-Type: application/json' "
            f"-d '{body}'")
        out(f"  curl -s '{base}/api/diagnosis/demo-1/runs' -H 'Authorization: Token {token}'")
        out(f"  curl -s '{base}/api/diagnosis/demo-1/trace?runId=<runId from the first answer>' -H 'Authorization: Token {token}'")
        out(f"  curl -N '{base}/api/runs/<runId>/events' -H 'Authorization: Token {token}'")
        out(f"  curl -s -X POST {base}/api/feedback -H 'Authorization: Token {token}' -H 'Content-Type: application/json' "
            "-d '{\"sessionId\": \"demo-1\", \"runId\": \"<runId>\", \"feedback\": \"useful\"}'\n")
