from pathlib import Path

from django.core.management.base import CommandError

from diagnosis.management.arguments import ValidatedCommand

from diagnosis.services.knowledge import knowledge_load_folder


class Command(ValidatedCommand):
    help = "Load a folder of Markdown runbooks into the knowledge base (unchanged files are skipped)."

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path)
        parser.add_argument("--prefix", default="", help="Path prefix stored with each document, e.g. 'runbooks/'.")

    def handle(self, folder: Path, prefix: str, **options):
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        counts = knowledge_load_folder(folder=folder, prefix=prefix)
        self.stdout.write(self.style.SUCCESS(
            f"loaded {counts['documents']} documents ({counts['chunks']} chunks), {counts['unchanged']} unchanged"
        ))
