"""The two audit roles (SPEC §8): support staff (view + feedback) and auditor (view only).

Django creates the default view permissions only after migrate (post_migrate), so this migration
creates the content types and permissions it needs itself; post_migrate then finds them in place.
`give_feedback` lives here, not in the model Meta, so the audit models stay untouched.
"""

from django.db import migrations

SUPPORT_STAFF = "support_staff"
AUDITOR = "auditor"
VIEWED_MODELS = (
    "chatsession", "diagnosisrun", "agentstep", "toolinvocation", "runevent",
    "caselibraryentry", "knowledgedocument", "knowledgechunk",
)
GIVE_FEEDBACK = ("give_feedback", "Can give feedback on runs")


def _content_type(apps, model_name):
    ContentType = apps.get_model("contenttypes", "ContentType")
    content_type, _ = ContentType.objects.get_or_create(app_label="diagnosis", model=model_name)
    return content_type


def _view_permission(apps, model_name):
    Permission = apps.get_model("auth", "Permission")
    verbose_name = apps.get_model("diagnosis", model_name)._meta.verbose_name_raw
    permission, _ = Permission.objects.get_or_create(
        content_type=_content_type(apps, model_name),
        codename=f"view_{model_name}",
        defaults={"name": f"Can view {verbose_name}"},
    )
    return permission


def create_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    view = [_view_permission(apps, name) for name in VIEWED_MODELS]
    codename, name = GIVE_FEEDBACK
    give_feedback, _ = Permission.objects.get_or_create(
        content_type=_content_type(apps, "diagnosisrun"), codename=codename, defaults={"name": name},
    )
    support_staff, _ = Group.objects.get_or_create(name=SUPPORT_STAFF)
    support_staff.permissions.add(*view, give_feedback)
    auditor, _ = Group.objects.get_or_create(name=AUDITOR)
    auditor.permissions.add(*view)


def remove_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    Group.objects.filter(name__in=(SUPPORT_STAFF, AUDITOR)).delete()
    # The view permissions belong to Django and stay; only our custom one goes.
    Permission.objects.filter(
        content_type__app_label="diagnosis", content_type__model="diagnosisrun", codename=GIVE_FEEDBACK[0],
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("diagnosis", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
