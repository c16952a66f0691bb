#!/usr/bin/env node
import { launch } from '@gatehouse/plugin-sdk/launch';

await launch(import.meta.url, 'cli/main');
