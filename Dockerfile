# One image for every process of the stack (web, worker, beat, release): see compose.yaml and docs/DEPLOY.md.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    STATIC_ROOT=/app/static PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus-multiproc

RUN apt-get update \
 && apt-get install -y --no-install-recommends default-libmysqlclient-dev pkg-config build-essential \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt
COPY . .
# Static files are part of the image: hashed, compressed, served by whitenoise from the web process.
RUN DJANGO_DEBUG=false DJANGO_SECRET_KEY=collectstatic-only ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --noinput \
 && useradd --system --uid 10001 aiops && mkdir -p /app/var && chown aiops /app/var
USER aiops

EXPOSE 8000
CMD ["gunicorn", "-c", "config/gunicorn.py", "config.asgi:application"]
