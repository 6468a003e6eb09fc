from django.core.management.base import CommandError

from diagnosis.management.arguments import ValidatedCommand

from diagnosis.services.users import api_client_create


class Command(ValidatedCommand):
    help = "Create (or show) an API client user and print its token."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="Replace the existing token.")

    def handle(self, username, rotate, **options):
        try:
            _, token = api_client_create(username=username, rotate=rotate)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(token)
